# Test-only stand-in for the `safetensors` package (not installed here): just enough for
# `from safetensors.torch import save_file`, so the hooks in docs/import/*.md run unchanged.
