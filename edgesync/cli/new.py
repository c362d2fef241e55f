"""`edgesync new algorithm|model|dataset NAME`: a pip-installable package of one extension, from the templates in
edgesync/cli/templates/: pyproject.toml with the entry point, src/NAME/__init__.py with a template that works,
tests/test_NAME.py calling the conformance kit, README.md and a scenario NAME.yaml that uses it."""
from __future__ import annotations

import importlib.util
import keyword
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path
from string import Template

import typer

from edgesync.cli.shared import err, out
from edgesync.extensions import API_VERSION


class Kind(str, Enum):
    algorithm = "algorithm"
    model = "model"
    dataset = "dataset"


@dataclass(frozen=True)
class Blueprint:
    group: str        # the entry-point group
    attr: str         # what the entry point names in the package (NAME is replaced)
    a_kind: str       # "an algorithm"
    description: str  # the package's one-line description ({name} is replaced)
    what: str         # what the template is, for the README


BLUEPRINTS = {
    Kind.algorithm: Blueprint("edgesync.algorithms", "NAME", "an algorithm", "An algorithm for EdgeSync",
                              "The template is FedAvg with a few local steps per round: the place to start a "
                              "new algorithm from."),
    Kind.model: Blueprint("edgesync.models", "build", "a model", "A model for EdgeSync",
                          "The template is a small CNN for images of any size, of a `width` a scenario sets."),
    Kind.dataset: Blueprint("edgesync.datasets", "load", "a dataset", "A dataset for EdgeSync",
                            "The template generates 28×28 images of bars whose row is the label: replace it with "
                            "your data."),
}


def new(kind: Kind = typer.Argument(..., help="what the package holds: algorithm, model or dataset"),
        name: str = typer.Argument(..., help="the package's name: a Python identifier, also the name a scenario uses"),
        folder: Path = typer.Option(Path("."), "--dir", help="where to create the package's folder NAME/")):
    """Create a pip-installable package of one extension, with a template that works and tests that run the
    conformance kit on it."""
    target = folder / name
    problem = name_problem(name) or folder_problem(target)
    if problem:
        err.print(f"[red]{problem}[/red]", highlight=False)
        raise typer.Exit(2)
    written = write_package(kind, name, target)
    out.print(f"Wrote {kind.value} {name!r} in {target}/:", highlight=False)
    for path in written:
        out.print(f"  {path.relative_to(target)}", highlight=False)
    out.print(f"Next:\n  pip install -e {target}\n  pytest {target}\n  edgesync run {target / (name + '.yaml')}",
              highlight=False)


def name_problem(name: str) -> str | None:
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"{name!r} is not a valid Python identifier: a package's name is letters, digits and _, not first a digit"
    if importlib.util.find_spec(name) is not None:
        return f"{name!r}: a module of that name is already importable here; the package would hide it or hide behind it"
    return None


def folder_problem(target: Path) -> str | None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        return f"{target} already exists and is not an empty folder: nothing was written"
    return None


def write_package(kind: Kind, name: str, target: Path) -> list[Path]:
    """The package's files under `target`, rendered from the templates; returns their paths."""
    blueprint = BLUEPRINTS[kind]
    values = {"name": name, "Name": "".join(part.capitalize() for part in name.split("_")) or name,
              "NAME": name.upper(), "kind": kind.value, "group": blueprint.group,
              "attr": blueprint.attr.replace("NAME", name.upper()), "a_kind": blueprint.a_kind,
              "description": blueprint.description, "what": blueprint.what, "api_version": API_VERSION}
    files = {
        Path("pyproject.toml"): ("common", "pyproject.toml.tmpl"),
        Path("README.md"): ("common", "README.md.tmpl"),
        Path("src", name, "__init__.py"): (kind.value, "__init__.py.tmpl"),
        Path("tests", f"test_{name}.py"): (kind.value, "test.py.tmpl"),
        Path(f"{name}.yaml"): (kind.value, "scenario.yaml.tmpl"),
    }
    templates = resources.files("edgesync.cli") / "templates"
    written = []
    for path, (part, template) in files.items():
        text = Template((templates / part / template).read_text(encoding="utf-8")).substitute(values)
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text, encoding="utf-8")
        written.append(target / path)
    return written
