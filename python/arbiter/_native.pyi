# Type stubs of the compiled module (crates/python/src/py.rs). The public API is in
# arbiter/__init__.py and its modules; these are the calls it builds on.
from pathlib import Path
from typing import Any, List, Optional

class ArbiterError(Exception):
    """Anything Arbiter refused or could not do; the message is the command line's."""

class ScenarioError(ArbiterError):
    """A scenario key, a `set` override or an argument is wrong."""

class TraceError(ArbiterError):
    """A trace could not be read: the file, its format, a column or a row."""

class PolicyError(ArbiterError):
    """An unknown policy, a policy parameter refused, or a policy that failed."""

class DecisionError(PolicyError):
    """A policy written in Python answered what cannot be carried out, or raised (its __cause__)."""

class Run:
    @property
    def name(self) -> str: ...
    def results_json(self) -> str: ...
    def published_json(self) -> str: ...
    def jobs_csv(self) -> str: ...
    def warnings(self) -> List[str]: ...
    def write_report(self, dir: str) -> Path: ...

def run_scenario(path: str, overrides: List[str], timeline: bool, policy: Optional[Any] = None) -> Run: ...
def simulate(
    trace: str,
    format: str,
    policy: str,
    cluster: Optional[str],
    seed: int,
    tables: str,
    overrides: List[str],
    timeline: bool,
    python_policy: Optional[Any] = None,
) -> Run: ...
def assignment(key: str, json: str) -> str: ...
def read_trace(path: str, format: str, options: str) -> str: ...
def analyze_trace(path: str, format: str, report: Optional[str] = None) -> str: ...
def policies() -> str: ...
