"""The scripts in ops/ (benchmarks and probes), run as real processes at their smoke size."""
