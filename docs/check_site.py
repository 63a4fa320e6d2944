"""Checks the built site's HTML: what a reader needs on the home page and every guide.

    python docs/check_site.py site

For the home page and each page under guides/: the navigation (Material's `md-nav` with a link
to every guide), the search box (`md-search`) and, for pages with code blocks, highlighted code
(Pygments' `highlight` blocks with token spans); for the site: a search index that lists every
guide. A headless browser shows the same (about.md says how to look); this check needs none, so
CI runs it after `mkdocs build` (`make docs`).
"""

import json
import re
import sys
from pathlib import Path

TOKEN = re.compile(r'<span class="(?:k|kn|nb|nf|s[12d]?|o|mi|mf|c1|nt|na|nv)">')


def page_problems(html, guides, needs_code):
    """What a page lacks: ["no navigation", ...] (empty when it is complete)."""
    problems = []
    if 'class="md-nav' not in html:
        problems.append("no navigation (md-nav)")
    missing = [g for g in guides if f'guides/{g}/"' not in html and f'{g}/"' not in html]
    if missing:
        problems.append(f"navigation lacks {missing}")
    if 'class="md-search' not in html:
        problems.append("no search box (md-search)")
    if needs_code and not ('class="highlight"' in html and TOKEN.search(html)):
        problems.append("no highlighted code (Pygments spans)")
    return problems


def site_problems(site):
    """Every problem of the built site at `site`, as 'page: problem' lines."""
    site = Path(site)
    guides = sorted(p.name for p in (site / "guides").iterdir() if p.is_dir())
    problems = []
    if len(guides) < 10:
        problems.append(f"site: {len(guides)} guides, expected at least 10")
    index = site / "search" / "search_index.json"
    if not index.exists():
        problems.append("site: no search/search_index.json")
    else:
        locations = {doc["location"] for doc in json.loads(index.read_text())["docs"]}
        unindexed = [g for g in guides if f"guides/{g}/" not in locations]
        if unindexed:
            problems.append(f"search index lacks {unindexed}")
    pages = [(site / "index.html", True)]
    pages += [(site / "guides" / g / "index.html", True) for g in guides]
    for path, needs_code in pages:
        html = path.read_text(encoding="utf-8")
        found = page_problems(html, guides, needs_code)
        problems += [f"{path.relative_to(site)}: {problem}" for problem in found]
    return problems


def main(argv):
    site = argv[1] if len(argv) > 1 else "site"
    problems = site_problems(site)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"check_site: {site}: navigation, search and highlighted code on every guide")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
