"""fusebench: the harness that benchmarks the compiler and its peers on curated suites."""
