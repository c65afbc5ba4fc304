"""Curated benchmark cases (see ../ARCHITECTURE in the project docs); discovered by fusebench and asv."""
