"""Count ``Any`` in kira's type annotations, per package.

Three spellings are counted, as issue #32 counts them: ``: Any`` (a parameter or variable),
``-> Any`` (a return) and ``Any]`` (Any inside a subscript, e.g. ``dict[str, Any]``).
Comments are left out; strings are not (a quoted annotation counts like a bare one).

    python tools/count_any.py                  # python/kira of this checkout
    python tools/count_any.py --root /path/to/other/python/kira
"""

from __future__ import annotations

import argparse
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

PATTERNS = {
    ": Any": re.compile(r":\s*Any\b"),
    "-> Any": re.compile(r"->\s*Any\b"),
    "Any]": re.compile(r"\bAny\]"),
}


def code_without_comments(source: str) -> str:
    """The source with every comment token blanked out (line structure kept)."""
    lines = source.splitlines(keepends=True)
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            line = lines[row - 1]
            lines[row - 1] = line[:col] + line[tok.end[1]:]
    return "".join(lines)


def package_of(path: Path, root: Path) -> str:
    """``pipeline`` for python/kira/pipeline/x.py; ``(top level)`` for python/kira/x.py."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else "(top level)"


def count_any(root: Path) -> dict[str, Counter[str]]:
    """Per package, how many times each spelling in PATTERNS occurs in its .py files."""
    counts: dict[str, Counter[str]] = {}
    for path in sorted(root.rglob("*.py")):
        code = code_without_comments(path.read_text(encoding="utf-8"))
        package = counts.setdefault(package_of(path, root), Counter())
        for name, pattern in PATTERNS.items():
            package[name] += len(pattern.findall(code))
    return counts


def table(counts: dict[str, Counter[str]]) -> str:
    """A Markdown table: one row per package, one column per spelling, and a total."""
    names = list(PATTERNS)
    rows = ["| package | " + " | ".join(f"`{n}`" for n in names) + " | total |",
            "|---|" + "---:|" * (len(names) + 1)]
    grand: Counter[str] = Counter()
    for package in sorted(counts):
        c = counts[package]
        grand.update(c)
        rows.append(f"| {package} | " + " | ".join(str(c[n]) for n in names)
                    + f" | {sum(c[n] for n in names)} |")
    rows.append("| **all** | " + " | ".join(str(grand[n]) for n in names)
                + f" | {sum(grand[n] for n in names)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parent.parent / "python" / "kira"
    parser.add_argument("--root", type=Path, default=here, help="the kira package folder")
    args = parser.parse_args()
    if not args.root.is_dir():
        parser.error(f"{args.root} is not a folder; pass the path of python/kira")
    print(table(count_any(args.root)))


if __name__ == "__main__":
    main()
