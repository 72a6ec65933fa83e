"""The WMT16 recipes' parts: option parsing, downloads and stages in bash (common.sh sources them), their data
and evaluation steps in Python (tools.py, the command line)."""
