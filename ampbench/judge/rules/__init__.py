"""Layer: judge rules. One module per rule family; `registry.RULES` lists them in the order they run."""
