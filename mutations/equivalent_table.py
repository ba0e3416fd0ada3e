"""Print mutations/equivalent.toml as the markdown table docs/mutations.md shows (python3 mutations/equivalent_table.py)."""
import tomllib
from pathlib import Path

data = tomllib.loads((Path(__file__).parent / "equivalent.toml").read_text())["equivalent"]
print("| mutant | why no test can tell it from the original |")
print("| --- | --- |")
for name, reason in data.items():
    print(f"| `{name}` | {reason.replace('|', '/')} |")
