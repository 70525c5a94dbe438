"""``workbench strategies``: every registered strategy, whether it can run here, its parameters."""

from __future__ import annotations

import click

from workbench.cli.common import json_option
from workbench.formatting import json_text
from workbench.report.text import text_table

#: the table's width: the reports' (``render_text``), a reason a strategy is unavailable wrapped
TABLE_WIDTH = 120


@click.command()
@click.option("-v", "--verbose", is_flag=True, help="Also list each strategy's parameters.")
@json_option
def strategies(verbose: bool, as_json: bool) -> None:
    """Every registered strategy (built-in and plugins), whether it can run here and why not."""
    from workbench.core.config import config_fields
    from workbench.core.registry import list_strategies

    infos = list_strategies()
    if as_json:
        click.echo(
            json_text(
                [
                    {
                        "name": i.name,
                        "target": i.target,
                        "description": i.description,
                        "available": i.available,
                        "unavailable_reason": i.unavailable,
                        "parameters": [vars(f) for f in config_fields(i.cls.Config)] if i.cls else [],
                    }
                    for i in infos
                ]
            )
        )
        return
    click.echo(
        text_table(
            ["strategy", "available", "description"],
            [[i.name, "yes" if i.available else f"no: {i.unavailable}", i.description] for i in infos],
            width=TABLE_WIDTH,
        )
    )
    if verbose:
        for i in infos:
            if i.cls is None:
                continue
            fields = config_fields(i.cls.Config)
            click.echo(f"\n{i.name} ({i.target})" + ("" if fields else ": no parameters"))
            for f in fields:
                choices = f" [{'|'.join(map(str, f.choices))}]" if f.choices else ""
                click.echo(f"  {f.name} = {f.default!r}  ({f.type}{choices})  {f.help}")
