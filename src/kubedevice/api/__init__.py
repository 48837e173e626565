"""Wire contracts only: the .proto sources, the modules generated from them, and the constants."""
