"""`ampbench import TOOLKIT ...`: a toolkit's config (or arguments) into a suite (commands/imports.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from ampbench.cli.base import (
    _choices,
    _fail,
    _only_with,
    err,
    import_app,
    out,
)


@import_app.command("paddleocr")
def import_paddleocr_cmd(
    config: Path = typer.Argument(..., help="A PaddleOCR det config (YAML), e.g. det_mv3_db.yml"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Use ampbench's synthetic text, not the label files"),
    repo: Path | None = typer.Option(None, "--repo", help="A PaddleOCR checkout: a command suite running its "
                                        "tools/train.py -c CONFIG (any architecture) instead of a translation"),
    python: str | None = typer.Option(None, "--python", help="With --repo: the interpreter that runs "
                                         "tools/train.py (default: this one)"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="With --repo: train from random "
                                       "initialisation (empties Global.pretrained_model and checkpoints)"),
) -> None:
    """PaddleOCR config -> suite (fp32 + its AMP modes); keys not honoured are listed; exit 2 if unsupported."""
    _only_with("--python", python, "--repo", repo)
    _only_with("--no-pretrained", no_pretrained or None, "--repo", repo)
    if repo is not None and synthetic_data and output is None:
        _fail("--synthetic-data: with --repo the images are written beside the suite file: give -o SUITE.toml")
    from ampbench.commands.imports import import_paddleocr, write_imported

    imported = import_paddleocr(config, output, synthetic_data, repo, python, not no_pretrained)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddleclas")
def import_paddleclas_cmd(
    config: Path = typer.Argument(..., help="A PaddleClas config (YAML), e.g. ppcls/configs/ImageNet/ResNet/ResNet50.yaml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleClas checkout: the suite runs its tools/train.py -c CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/train.py"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="Random initialisation (Arch.pretrained=False)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Small synthetic images in its ImageNet "
                                        "list format, written beside the suite file, instead of the config's data"),
) -> None:
    """PaddleClas config -> command suite (fp32 + AMP.use_amp=True at O1/O2, evaluation after train.steps)."""
    from ampbench.commands.imports import import_paddleclas, write_imported

    _synthetic_needs_output(synthetic_data, output)
    imported = import_paddleclas(config, output, repo, python, not no_pretrained, synthetic_data)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddleseg")
def import_paddleseg_cmd(
    config: Path = typer.Argument(..., help="A PaddleSeg config (YAML), e.g. configs/pp_liteseg/pp_liteseg_stdc1_cityscapes_1024x512_scale0.5_160k.yml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleSeg checkout: the suite runs its tools/train.py --config CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/train.py"),
    no_pretrained: bool = typer.Option(False, "--no-pretrained", help="Random initialisation (--opts model.pretrained=None ...)"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Small synthetic images in its Dataset format, "
                                        "written beside the suite file, instead of the config's data"),
) -> None:
    """PaddleSeg config -> command suite (fp32 + --precision fp16 --amp_level O1/O2, mIoU from its [EVAL] line)."""
    from ampbench.commands.imports import import_paddleseg, write_imported

    _synthetic_needs_output(synthetic_data, output)
    imported = import_paddleseg(config, output, repo, python, not no_pretrained, synthetic_data)
    write_imported(imported, str(config), output, out, err)


@import_app.command("paddlerec")
def import_paddlerec_cmd(
    config: Path = typer.Argument(..., help="A PaddleRec config (YAML), e.g. models/rank/deepfm/config.yaml"),
    repo: Path = typer.Option(..., "--repo", help="A PaddleRec checkout: the suite runs its tools/trainer.py -m CONFIG"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    python: str | None = typer.Option(None, "--python", help="The interpreter that runs tools/trainer.py"),
    synthetic_data: bool = typer.Option(False, "--synthetic-data", help="Synthetic Criteo-format samples, written "
                                        "beside the suite file, instead of runner.train_data_dir"),
) -> None:
    """PaddleRec config -> command suite (fp32 + AMP injected by ampbench: its trainer has no AMP switch)."""
    from ampbench.commands.imports import import_paddlerec, write_imported

    _synthetic_needs_output(synthetic_data, output)
    write_imported(import_paddlerec(config, output, repo, python, synthetic_data), str(config), output, out, err)


def _synthetic_needs_output(synthetic_data: bool, output: Path | None) -> None:
    if synthetic_data and output is None:
        _fail("--synthetic-data: the data is written beside the suite file: give -o SUITE.toml")


@import_app.command("paddlenlp")
def import_paddlenlp_cmd(
    args_json: Path | None = typer.Argument(None, help="Trainer arguments as JSON (PaddleNLP's parse_json_file format)"),
    args: str | None = typer.Option(None, "--args", help='Trainer arguments as on the command line: "--fp16 ..."'),
    output: Path | None = typer.Option(None, "-o", "--output", help="Suite file to write (default: stdout)"),
    source: str = typer.Option("paddleformers", "--source", metavar=_choices("paddleformers", "paddlenlp"),
                               help="BERT package the suite uses: paddleformers (installed by setup.sh) or paddlenlp"),
    script: Path | None = typer.Option(None, "--script", help="Your Trainer script: a command suite running it "
                                          "with these arguments, instead of the bert suite"),
    python: str | None = typer.Option(None, "--python", help="With --script: the interpreter that runs it"),
) -> None:
    """PaddleNLP Trainer args -> the bert suite (or, with --script, your script) with fp32 + AMP modes."""
    from ampbench.commands.imports import import_paddlenlp, write_imported

    _only_with("--python", python, "--script", script)
    if script is not None and source != "paddleformers":
        _fail("--source: not with --script (your script imports its own package)")
    imported, where = import_paddlenlp(args_json, args, output, source, script, python)
    write_imported(imported, where, output, out, err)
