"""`ampbench import paddleocr|paddleclas|paddleseg|paddlerec|paddlenlp`: a suite from another tool's configuration (the importers/ package
translates; this module is the use-case: the output check before anything is read, which importer a
combination of options means, and writing the suite with what was decided and not honoured)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, check_output, refuse_link
from ampbench.importers.base import Imported, add_emulated_profile, render_checked


def check_import_output(output: Path | None, inputs: list[Path | None]) -> None:
    """-o checked before reading anything, on every import path: never an input (config, arguments,
    script), a record, a folder or an existing file that is not a suite (.toml); its folder exists."""
    if output is not None:
        check_output(output, [p for p in inputs if p is not None], kinds=(".toml",))
        if not output.parent.is_dir():
            raise ResultsError(f"{output}: cannot write: the folder {output.parent} does not exist")


def import_paddleocr(config: Path, output: Path | None, synthetic_data: bool, repo: Path | None,
                     python: str | None, pretrained: bool) -> Imported:
    """A PaddleOCR config: with a checkout (`repo`), a command suite running its tools/train.py (synthetic
    data written beside the suite file); without, a translation to the built-in DBNet suite."""
    check_import_output(output, [config])
    if repo is not None:
        from ampbench.importers.paddleocr_command import import_paddleocr_command

        root = output.parent / f"{output.stem}-data" if synthetic_data and output is not None else None
        if root is not None:
            _refuse_linked_data(root)
        return import_paddleocr_command(config, repo, python, root, pretrained)
    from ampbench.importers.paddleocr import import_paddleocr as translate

    return translate(config, synthetic=synthetic_data)


def _refuse_linked_data(root: Path) -> None:
    """--synthetic-data writes images and labels into `root` (DIR/<suite>-data), its `scene_text` folder
    and one folder per split there: none of them may be a symbolic link (it would be written through)."""
    refuse_link(root)
    refuse_link(root / "scene_text")
    if (root / "scene_text").is_dir():
        for entry in (root / "scene_text").iterdir():
            refuse_link(entry)
            if entry.is_dir():
                for inner in entry.iterdir():
                    refuse_link(inner)


def _data_root(output: Path | None, synthetic_data: bool) -> Path | None:
    """--synthetic-data goes to DIR/<suite>-data beside the suite file (never through a link)."""
    if not synthetic_data or output is None:
        return None
    root = output.parent.resolve() / f"{output.stem}-data"   # absolute: the program runs in the checkout
    refuse_link(root)
    return root


def import_paddlerec(config: Path, output: Path | None, repo: Path, python: str | None,
                     synthetic_data: bool = False) -> Imported:
    """A PaddleRec config run by the checkout's tools/trainer.py (AMP injected: its trainer has no switch)."""
    check_import_output(output, [config])
    from ampbench.importers.paddlerec_command import import_paddlerec_command

    return import_paddlerec_command(config, repo, python, _data_root(output, synthetic_data))


def import_paddleclas(config: Path, output: Path | None, repo: Path, python: str | None,
                      pretrained: bool, synthetic_data: bool = False) -> Imported:
    """A PaddleClas config run by the checkout's tools/train.py (AMP through its own AMP section)."""
    check_import_output(output, [config])
    from ampbench.importers.paddleclas_command import import_paddleclas_command

    return import_paddleclas_command(config, repo, python, pretrained, _data_root(output, synthetic_data))


def import_paddleseg(config: Path, output: Path | None, repo: Path, python: str | None,
                     pretrained: bool, synthetic_data: bool = False) -> Imported:
    """A PaddleSeg config run by the checkout's tools/train.py (AMP through its --precision / --amp_level)."""
    check_import_output(output, [config])
    from ampbench.importers.paddleseg_command import import_paddleseg_command

    return import_paddleseg_command(config, repo, python, _data_root(output, synthetic_data), pretrained)


def import_paddlenlp(args_json: Path | None, args: str | None, output: Path | None, source: str,
                     script: Path | None, python: str | None) -> tuple[Imported, str]:
    """Trainer arguments: with the user's `script`, a command suite running it; without, the bert suite.
    Returns the suite and where its arguments came from."""
    from ampbench.importers.paddlenlp import import_paddlenlp as translate
    from ampbench.importers.paddlenlp import load_args

    check_import_output(output, [args_json, script])
    parsed, where = load_args(args_json, args)
    if script is not None:
        from ampbench.importers.paddlenlp_command import import_paddlenlp_command

        return import_paddlenlp_command(parsed, where, script, python), where
    return translate(parsed, where, source), where


def write_imported(imported: Imported, source: str, output: Path | None, out: Console, err: Console) -> None:
    """The suite to `output` (atomically) or stdout; what was decided and not honoured to stderr."""
    add_emulated_profile(imported)
    text = render_checked(imported, source, str(output or "<stdout>"))
    if output is None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        atomic_write_text(output, text)
        err.print(f"wrote {output}", markup=False, highlight=False)
    for key, why in imported.not_honoured.items():
        err.print(f"not honoured: {key}: {why}", markup=False, highlight=False, soft_wrap=True)
    for line in imported.decisions:
        err.print(f"decided: {line}", markup=False, highlight=False, soft_wrap=True)
