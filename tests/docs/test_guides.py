"""The guides' code runs: every `python` and `sh` block of docs/guides/*.md is executed in order at
a tiny size (tests/docs/guide_runner.py says how a guide marks sizes, fixtures and skips). Pages
marked slow run under `make test-slow`."""

from pathlib import Path

import guide_fixtures
import guide_runner
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The guides, and the home page (its code block is the first a reader meets).
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md")) + [ROOT / "docs" / "index.md"]
MAX_SKIPPED_SHARE = 0.25  # Skipped blocks stay few: network, real data, hours, APIs to come.


def _param(path):
    slow = guide_runner.parse(path).slow
    return pytest.param(path, id=path.stem, marks=[pytest.mark.slow] if slow else [])


def test_there_are_ten_guides_with_code_and_few_skips():
    guides = [guide_runner.parse(path) for path in GUIDES]
    assert len(guides) >= 11, [g.path.name for g in guides]
    runnable = sum(len(g.runnable) for g in guides)
    skipped = [(g.path.name, b.line, b.skip) for g in guides for b in g.skipped]
    assert runnable >= 30, runnable
    assert len(skipped) <= MAX_SKIPPED_SHARE * (runnable + len(skipped)), skipped
    assert all(g.runnable for g in guides), [g.path.name for g in guides if not g.runnable]


def test_the_runner_applies_tiny_rules_and_refuses_stale_ones():
    code = "keras-bert-pretrain --model=base \\\n    --num_train_steps=100000\necho done"
    shrunk = guide_runner.shrink(
        code, ["--num_train_steps=100000 => --num_train_steps=2", "+ --x=1"]
    )
    assert shrunk == "keras-bert-pretrain --model=base      --num_train_steps=2 --x=1\necho done"
    with pytest.raises(ValueError, match="not in the block"):
        guide_runner.shrink(code, ["--num_train_steps=5 => --num_train_steps=2"])


def test_a_directive_without_a_block_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- skip: network -->\nSome text.\n\n```sh\necho hi\n```\n")
    with pytest.raises(ValueError, match="right before a block"):
        guide_runner.parse(page)
    page.write_text("<!-- skip: -->\n```sh\necho hi\n```\n")
    with pytest.raises(ValueError, match="needs a reason"):
        guide_runner.parse(page)


def test_a_failing_block_fails_the_guide_naming_its_line(tmp_path):
    page = tmp_path / "guides" / "page.md"
    page.parent.mkdir()
    page.write_text("```python\nx = 1\n```\n\n```sh\ntest $(( 1 + 1 )) = 3\n```\n")
    status, output = guide_runner.run(guide_runner.parse(page), tmp_path, tmp_path, timeout=60)
    assert status != 0 and "guides/page.md:6: exit status 1" in output, output


@pytest.mark.parametrize("path", [_param(path) for path in GUIDES])
def test_guide_runs(path, tmp_path):
    guide = guide_runner.parse(path)
    guide_fixtures.write(guide.fixtures, tmp_path)
    status, output = guide_runner.run(guide, ROOT, tmp_path, timeout=900)
    assert status == 0, output[-6000:]
    for block in guide.runnable:  # Every block ran, in order.
        assert f"--- {path.relative_to(ROOT)}:{block.line}" in output
