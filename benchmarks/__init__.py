"""Recording and analysis jobs (not part of the app): each module runs with
`python -m benchmarks.<name> --help`. Writers of benchmarks/results/ stamp the schema that
engine.recorded validates; raw records and logs go to lab/ (lab/README.md)."""
