"""docs/check_site.py, the check CI runs on the built site's HTML (`make docs`): it finds a page
without navigation, search or highlighted code, and a guide missing from the search index."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
import check_site  # noqa: E402

GUIDES = [f"guide{k}" for k in range(10)]
NAV = '<nav class="md-nav">' + "".join(f'<a href="guides/{g}/">{g}</a>' for g in GUIDES) + "</nav>"
SEARCH = '<div class="md-search">'
CODE = '<div class="highlight"><pre><span class="kn">import</span> keras_bert</pre></div>'


def write_site(root, page=NAV + SEARCH + CODE, indexed=GUIDES):
    (root / "search").mkdir(parents=True)
    docs = [{"location": f"guides/{g}/"} for g in indexed]
    (root / "search" / "search_index.json").write_text(json.dumps({"docs": docs}))
    (root / "index.html").write_text(page)
    for guide in GUIDES:
        (root / "guides" / guide).mkdir(parents=True)
        (root / "guides" / guide / "index.html").write_text(page)


def test_a_complete_site_passes(tmp_path):
    write_site(tmp_path)
    assert check_site.site_problems(tmp_path) == []


def test_missing_search_highlighting_and_index_entries_are_named(tmp_path):
    write_site(tmp_path, page=NAV + "<pre>import keras_bert</pre>", indexed=GUIDES[1:])
    problems = check_site.site_problems(tmp_path)
    assert "search index lacks ['guide0']" in problems
    assert "index.html: no search box (md-search)" in problems
    assert "guides/guide3/index.html: no highlighted code (Pygments spans)" in problems
    assert check_site.main(["check_site", str(tmp_path)]) == 1


def test_navigation_must_list_every_guide(tmp_path):
    write_site(
        tmp_path, page=NAV.replace('<a href="guides/guide7/">guide7</a>', "") + SEARCH + CODE
    )
    assert "index.html: navigation lacks ['guide7']" in check_site.site_problems(tmp_path)
