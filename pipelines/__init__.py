"""KFP pipelines built from the components: one folder per pipeline (pipeline.py + compiled YAML)."""
