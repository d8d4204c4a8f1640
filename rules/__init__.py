"""The built-in rules (one YAML file per rule). This file lets the folder ship in the wheel as the package
``yolodoctor.builtin_rules`` (pyproject.toml maps it); it holds no code."""
