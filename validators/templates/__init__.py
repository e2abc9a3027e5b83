"""The HTML templates beside this file and their one loader: the run/gate report
(validators.reporting.html) and the fleet verdict (validators.fleet.render). A leaf module, so
both import it without importing each other's package."""

from __future__ import annotations

from functools import cache

import jinja2


@cache
def html_template(name: str) -> jinja2.Template:
    """A template of this folder, HTML-escaped, any undefined name an error."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("validators", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(name)
