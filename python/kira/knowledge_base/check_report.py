"""What `kira check` found in a knowledge base, whichever backend holds it: findings, and how to show them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Finding:
    """One thing that is wrong: where, what, and what `--repair` does about it."""

    where: str
    problem: str
    repair: str


@dataclass
class CheckReport:
    """What `check` found (`findings`, empty when all agrees), what it looked at (`checked`),
    and whether it repaired."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, Any] = field(default_factory=dict)
    repaired: bool = False
    remaining: list[Finding] | None = None
    """After a repair: what the check that followed it still found (None without a repair)."""

    @property
    def ok(self) -> bool:
        """Nothing was found wrong (before any repair)."""
        return not self.findings

    @property
    def fixed(self) -> bool:
        """Sound now: nothing was wrong, or a repair left nothing wrong."""
        return self.ok or (self.repaired and not self.remaining)

    def add(self, where: str, problem: str, repair: str) -> None:
        self.findings.append(Finding(where, problem, repair))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "repaired": self.repaired, "checked": self.checked,
                "findings": [asdict(f) for f in self.findings],
                "remaining": None if self.remaining is None else [asdict(f) for f in self.remaining]}

    def to_text(self) -> str:
        lines = [f"knowledge base {self.path}"]
        lines += [f"  checked {k}: {v}" for k, v in self.checked.items()]
        if self.ok:
            lines.append("  everything agrees")
        for f in self.findings:
            lines.append(f"  PROBLEM {f.where}: {f.problem}")
            lines.append(f"    {'repair did' if self.repaired else 'repair would'}: {f.repair}")
        if self.repaired:
            if not self.remaining:
                lines.append("  checked again after the repair: everything agrees")
            else:
                lines.append(f"  checked again after the repair: {len(self.remaining)} problem(s) repair could not fix")
                for f in self.remaining:
                    lines.append(f"  NOT FIXED {f.where}: {f.problem}")
                    lines.append(f"    to fix: {f.repair}")
        return "\n".join(lines)
