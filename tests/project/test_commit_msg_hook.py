"""The commit-msg hook (scripts/git-hooks/commit-msg) refuses commit subjects over
72 characters; `just setup` installs it for a clone and its worktrees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "scripts" / "git-hooks" / "commit-msg"


def isolated_git_environment(home: Path) -> dict[str, str]:
    """No global or system git configuration, a fixed identity."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.com",
    )
    return env


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(HOOK), str(path)],
        cwd=tmp_path,
        env=isolated_git_environment(tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_subject_of_73_characters_is_refused_with_its_length(tmp_path: Path) -> None:
    subject = "Add " + "x" * 69
    assert len(subject) == 73
    done = run_hook(tmp_path, subject + "\n\nThe body.\n")
    assert done.returncode == 1
    assert "the subject has 73 characters, over the limit of 72" in done.stderr
    assert subject in done.stderr
    assert "git commit -e -F" in done.stderr


def test_a_subject_of_72_characters_passes(tmp_path: Path) -> None:
    done = run_hook(tmp_path, "Add " + "x" * 68 + "\n")
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    "message",
    [
        # git's template: comments (longer than 72 characters) around the subject
        "# " + "c" * 90 + "\n\nFix the reader\n\n# Please enter the commit message.\n",
        "Fix the reader\n",  # no body
        "Fix the reader\n\n\n",  # a blank body
        "Fix the reader\n\n" + "a body line longer than the subject limit " * 3 + "\n",
        "\n\n   \nFix the reader\n",  # blank lines before the subject
        "# only comments\n",  # an empty message: git refuses it itself
        "é" * 72 + "\n",  # characters, not bytes
    ],
)
def test_comments_blank_lines_and_the_body_are_not_the_subject(
    tmp_path: Path, message: str
) -> None:
    done = run_hook(tmp_path, message)
    assert (done.returncode, done.stderr) == (0, "")


def setup_recipe() -> list[str]:
    """The commands of the justfile's `setup` recipe."""
    lines = (ROOT / "justfile").read_text(encoding="utf-8").splitlines()
    start = lines.index("setup:") + 1
    commands = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        commands.append(line.strip())
    return commands


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_just_setup_makes_every_worktree_refuse_long_subjects(tmp_path: Path) -> None:
    env = isolated_git_environment(tmp_path)
    repo, worktree = tmp_path / "repo", tmp_path / "worktree"

    def git(*arguments: str, cwd: Path = repo) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *arguments], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )

    repo.mkdir()
    assert git("init", "-q").returncode == 0
    (repo / "scripts" / "git-hooks").mkdir(parents=True)
    shutil.copy2(HOOK, repo / "scripts" / "git-hooks" / "commit-msg")
    git("add", "scripts")
    assert git("commit", "-q", "-m", "Add the hooks").returncode == 0
    for command in setup_recipe():
        subprocess.run(command, shell=True, cwd=repo, env=env, check=True)
    assert git("worktree", "add", "-q", str(worktree)).returncode == 0
    for place in (repo, worktree):
        refused = git("commit", "--allow-empty", "-q", "-m", "y" * 73, cwd=place)
        assert refused.returncode != 0
        assert "over the limit of 72" in refused.stderr
        assert git("commit", "--allow-empty", "-q", "-m", "y" * 72, cwd=place).returncode == 0
