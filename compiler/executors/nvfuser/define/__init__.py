"""Building an nvFuser fusion definition from a region (nothing here imports nvFuser)."""
