"""Every URL query parameter the app reads: the sidebar's controls (app/core/controls.py) and
each page's own (the controls of its row in app/page_list.py), and their text in a link.

`parse_value` turns the URL's text into a value or raises ValueError saying what is allowed,
so a tampered link shows a message."""
from __future__ import annotations

from app.core.controls import CONTROLS, Control
from app.page_list import PAGES

# page control -> (its page's url_path, the control)
PAGE_CONTROLS = {ctl.name: (row.url_path, ctl) for row in PAGES for ctl in row.controls}


def control(name: str) -> Control:
    """The sidebar or page control behind URL parameter `name`."""
    return CONTROLS[name] if name in CONTROLS else PAGE_CONTROLS[name][1]


def parse_value(name: str, raw: str):
    """The typed value of URL parameter `name`, or ValueError saying what is allowed."""
    ctl = control(name)
    text = str(raw).strip()
    fallback = "the page's default" if ctl.default is None else repr(ctl.default)
    bad = ValueError(f"The link's {name}={raw!r} is not allowed: {name} must be "
                     f"{ctl.allowed()}. Using {fallback} instead.")
    if ctl.kind == "bool":
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise bad
    if ctl.kind == "int":
        if not (text.isascii() and text.isdigit()) or not ctl.low <= int(text) <= ctl.high:
            raise bad
        return int(text)
    if ctl.kind == "float":
        try:
            val = float(text)
        except ValueError:
            raise bad from None
        if not ctl.low <= val <= ctl.high:   # also rejects nan
            raise bad
        return val
    for choice in ctl.choices:
        if text == str(choice):
            return choice
    raise bad


def to_text(value) -> str:
    """A value as the URL writes it."""
    return str(value).lower() if isinstance(value, bool) else str(value)
