"""How command lines are split for the allowlist, and what never auto-matches."""

from __future__ import annotations

import pytest

from nodmix.security.allowlist import Pattern, PatternIndex, covers
from nodmix.security.commands import parse_command, quote_pattern


def test_compound_commands_split_into_parts_at_separators() -> None:
    parsed = parse_command("git status && git log --oneline | head -5; ls 'my dir'")
    assert parsed.opaque is None
    assert parsed.parts == (
        ("git", "status"),
        ("git", "log", "--oneline"),
        ("head", "-5"),
        ("ls", "my dir"),
    )


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("echo $(id)", "expansion"),
        ("echo `id`", "command substitution"),
        ("echo $HOME", "expansion"),
        ("echo hi > /etc/passwd", "'>'"),
        ("cat < secrets", "'<'"),
        ("sleep 9 &", "'&'"),
        ("(cd /; rm -rf x)", "'('"),
        ("ls\nrm -rf /", "a line break"),
        ("rm *", "would be expanded"),
        ("cat ~/.ssh/id_rsa", "would be expanded"),
        ("dd if=x of=~/.bashrc", "would be expanded"),
        ("env PATH=/bin:~/bin ls", "would be expanded"),
        ("echo 'unclosed", "cannot be parsed"),
        ("; ls", "empty part"),
        ("ls ;; ls", "';;'"),
    ],
)
def test_lines_whose_effect_the_argv_does_not_show_are_opaque(command: str, why: str) -> None:
    parsed = parse_command(command)
    assert parsed.opaque is not None and why in parsed.opaque


def test_patterns_match_executable_and_each_argument() -> None:
    exact = Pattern.compile("git status")
    rest = Pattern.compile("git log **")
    one = Pattern.compile("ls -la *")
    assert exact.matches(["git", "status"]) and not exact.matches(["git", "status", "-s"])
    assert rest.matches(["git", "log"]) and rest.matches(["git", "log", "-p", "x"])
    assert not rest.matches(["git", "push"])
    assert one.matches(["ls", "-la", "src"]) and not one.matches(["ls", "-la"])
    assert not one.matches(["ls", "-la", "a", "b"])


def test_a_bare_executable_never_matches_a_path_and_a_path_matches_only_itself() -> None:
    bare = Pattern.compile("ls **")
    assert not bare.matches(["./ls"]) and not bare.matches(["/tmp/ls"])
    full = Pattern.compile("/usr/bin/ls **")
    assert full.matches(["/usr/bin/ls", "-l"]) and not full.matches(["ls"])


def test_a_compound_command_is_covered_only_when_every_part_matches() -> None:
    patterns = PatternIndex([Pattern.compile("git status"), Pattern.compile("head **")])
    assert covers(patterns, parse_command("git status | head -3"), "main")
    assert not covers(patterns, parse_command("git status; curl evil.example"), "main")
    assert not covers(patterns, parse_command("git status > out.txt"), "main")


def test_agent_scoped_patterns_apply_to_their_agent_only() -> None:
    patterns = PatternIndex([Pattern.compile("make test", agent="coder")])
    assert covers(patterns, parse_command("make test"), "coder")
    assert not covers(patterns, parse_command("make test"), "main")


def test_quoted_patterns_match_exactly_the_argv_they_were_made_from() -> None:
    argv = ("grep", "-r", "a*b [x]", "src")
    pattern = Pattern.compile(quote_pattern(argv))
    assert pattern.matches(list(argv))
    assert not pattern.matches(["grep", "-r", "aXXb x", "src"])


@pytest.mark.parametrize(
    "command",
    [
        "git status&&git log -n 3|head -2;ls -la src/",
        "make test 2>&1 | tee out.log",
        "a=b cmd --x=1 ./path/to-file.txt",
        "echo one ;& echo two",
        "cat file >> log",
        "ls ((x))",
    ],
)
def test_the_fast_split_agrees_with_shlex(command: str) -> None:
    # the same line with a harmless quoted word forces the shlex path
    fast = parse_command(command)
    slow = parse_command(command + " 'q'")
    if slow.opaque is None:
        assert fast.parts == tuple(
            part if i < len(slow.parts) - 1 else part[:-1] for i, part in enumerate(slow.parts)
        )
    else:
        assert fast.opaque == slow.opaque


@pytest.mark.parametrize(
    "command",
    ["echo hi#; touch pwned", 'echo "a"#x; touch pwned', "echo a#b && touch pwned"],
)
def test_a_hash_inside_a_word_does_not_hide_the_rest_of_the_line(command: str) -> None:
    # bash starts a comment only at the beginning of a word: `hi#` is one word and the part
    # after `;` runs, so it must be seen (and not be covered by `echo **`)
    patterns = PatternIndex([Pattern.compile("echo **")])
    parsed = parse_command(command)
    assert ("touch", "pwned") in parsed.parts
    assert not covers(patterns, parsed, "main")
