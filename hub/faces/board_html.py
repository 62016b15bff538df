"""The board's HTML pieces: the page around every view (inline CSS and the few lines of JavaScript that
keep it live), escaping, markdown, a highlighted diff and the SVG charts.

Everything is rendered on the server: pygments colours a diff, markdown-it-py renders a halt file (raw
HTML in it stays text), and the page's script only polls its live part. No JavaScript library, no
build step, nothing fetched from another site: the page works offline, and its Content-Security-Policy
(`board.py`) lets no other script run, since a diff or a halt file holds a model's words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import urlencode

# The page asks for its live part this often: a transition shows within a second.
POLL_MS = 500

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
header{background:#1d2329;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header b{font-size:1.1em}
main{padding:1em 1.2em;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff;margin:.4em 0 1.2em}
th,td{border-bottom:1px solid #e3e6ea;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
.state{font-family:ui-monospace,monospace;padding:.1em .45em;border-radius:3px;background:#e8eef6}
.s-merged{background:#d6f5dd}.s-erik_consultation{background:#ffd9d6}
.s-pending_judge_review,.s-judge_review_in_progress{background:#fff1c2}
.need{color:#a4262c;font-weight:600}.muted{color:#68717a}
.flash{background:#e6f4ea;border:1px solid #9ccfa8;padding:.5em .8em;margin-bottom:1em}
.error{background:#fde7e9;border:1px solid #e8a0a6;padding:.5em .8em;margin-bottom:1em}
pre{background:#fff;border:1px solid #e3e6ea;padding:.6em;overflow:auto;max-height:32em}
.md{background:#fff;border:1px solid #e3e6ea;padding:.2em 1em}
.highlight pre{margin:0}
form.action{background:#fff;border:1px solid #e3e6ea;padding:.6em;margin:.5em 0}
textarea{width:100%;min-height:4em;font:inherit}button{font:inherit;padding:.25em .9em}
"""

# Ask for the live part; a different key means the page's actions changed (a halt, a verdict due):
# load the whole page again rather than patch forms a person may be typing in. Once a form is sent the
# page is on its way out: the action changes the key before its answer arrives, and a reload then
# would cancel the navigation to that answer (its message lost; seen on a loaded machine). A page the
# browser brings back from its history cache (Back) polls again.
SCRIPT = """
(function(){
  var root=document.getElementById('live'); if(!root) return;
  var leaving=false, timer=null;
  function later(ms){clearTimeout(timer);timer=setTimeout(tick,ms);}
  document.addEventListener('submit',function(){leaving=true;clearTimeout(timer);});
  window.addEventListener('pageshow',function(ev){if(ev.persisted&&leaving){leaving=false;later(POLL);}});
  function tick(){
    if(leaving) return;
    fetch(root.dataset.src,{cache:'no-store'}).then(function(r){return r.ok?r.json():null}).then(function(d){
      if(leaving) return;
      if(d){
        if(d.key!==root.dataset.key){location.reload();return;}
        document.querySelectorAll('[data-part]').forEach(function(el){
          var html=d.parts[el.dataset.part]; if(html!==undefined&&html!==el.innerHTML){el.innerHTML=html;}
        });
      }
      later(POLL);
    }).catch(function(){later(POLL*4);});
  }
  later(POLL);
})();
""".replace("POLL", str(POLL_MS))


def e(text: object) -> str:
    return escape(str(text if text is not None else ""), quote=True)


class Links:
    """The board's URLs, each carrying the token (the page's only credential)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, path: str, **query: str) -> str:
        return e(f"{path}?{urlencode({'token': self.token, **query})}")


def part(name: str, html: str) -> str:
    """A piece of the page that its live updates replace (`parts[name]` of the live JSON)."""
    return f'<div data-part="{e(name)}">{html}</div>'


def page(title: str, body: str, links: Links, nonce: str, live: tuple[str, str] | None = None) -> str:
    """A whole page. `live`: (the URL of the JSON of its parts, the key it was rendered at); the script
    polls it and swaps in each `part` of `body` that changed."""
    attrs = f' id="live" data-src="{live[0]}" data-key="{e(live[1])}"' if live else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} · hub board</title><style>{STYLE}{diff_style()}</style></head><body>"
        f'<header><b>hub board</b><a href="{links("/")}">tasks</a>'
        f'<a href="{links("/evals")}">evals</a><span class="muted">{e(title)}</span></header>'
        f"<main{attrs}>{body}</main>"
        f'<script nonce="{e(nonce)}">{SCRIPT}</script></body></html>'
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "none") -> str:
    """A table of cells given as HTML (escape what you put in)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def state_badge(state: str) -> str:
    return f'<span class="state s-{e(state)}">{e(state)}</span>'


def pre(text: str) -> str:
    return f"<pre>{e(text)}</pre>"


def markdown(text: str) -> str:
    """A halt or stall report as HTML: raw HTML in it is shown as text, links stay http(s)/mailto."""
    from markdown_it import MarkdownIt

    return (
        '<div class="md">' + MarkdownIt("commonmark", {"html": False}).enable("table").render(text) + "</div>"
    )


_DIFF_STYLE: list[str] = []


def diff_style() -> str:
    """pygments' CSS for the highlighted diff, made once."""
    if not _DIFF_STYLE:
        from pygments.formatters import HtmlFormatter

        _DIFF_STYLE.append(HtmlFormatter(style="default").get_style_defs(".highlight"))
    return _DIFF_STYLE[0]


def diff(text: str) -> str:
    """A unified diff, coloured by pygments' diff lexer."""
    if not text.strip():
        return '<p class="muted">no change on the task branch yet</p>'
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    return str(highlight(text, DiffLexer(), HtmlFormatter(cssclass="highlight")))


def bar_chart(title: str, bars: Sequence[tuple[str, float, float]], unit: str = "") -> str:
    """An inline SVG of horizontal bars: (label, value, out of); each bar's length is value / out."""
    if not bars:
        return ""
    row, label_w, bar_w = 22, 220, 360
    height = row * len(bars) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" '
        f'role="img" aria-label="{e(title)}"><text x="0" y="14" font-weight="600">{e(title)}</text>'
    ]
    for i, (label, value, out_of) in enumerate(bars):
        y = 24 + i * row
        width = 0 if out_of <= 0 else max(1.0, bar_w * min(value / out_of, 1.0))
        parts.append(
            f'<text x="0" y="{y + 14}" font-size="12">{e(label[:34])}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="14" fill="#eef1f4"/>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width:.1f}" height="14" fill="#3b7dd8"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 14}" font-size="12">{value:g}{e(unit)}'
            + (f" / {out_of:g}" if not unit else "")
            + "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def split_chart(title: str, bars: Sequence[tuple[str, float, float]]) -> str:
    """An inline SVG of stacked bars: (label, model seconds, hub seconds), one scale for all rows."""
    if not bars:
        return ""
    row, label_w, bar_w = 22, 220, 360
    most = max((m + h for _, m, h in bars), default=0.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 170}" '
        f'height="{row * len(bars) + 30}" role="img" aria-label="{e(title)}">'
        f'<text x="0" y="14" font-weight="600">{e(title)}</text>'
        f'<text x="{label_w}" y="14" font-size="12" fill="#3b7dd8">■ model</text>'
        f'<text x="{label_w + 70}" y="14" font-size="12" fill="#e08a1e">■ hub</text>'
    ]
    for i, (label, model, hub) in enumerate(bars):
        y = 24 + i * row
        mw, hw = bar_w * model / most, bar_w * hub / most
        parts.append(
            f'<text x="0" y="{y + 14}" font-size="12">{e(label[:34])}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{mw:.1f}" height="14" fill="#3b7dd8"/>'
            f'<rect x="{label_w + mw:.1f}" y="{y + 3}" width="{max(hw, 1):.1f}" height="14" fill="#e08a1e"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 14}" font-size="12">{model:g} s / {hub:g} s</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
