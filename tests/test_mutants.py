"""tools/mutants.py: every deliberate slip and variant of submission.py still applies (its
anchors occur as often as its edits say), and one that does not apply fails naming the
mutant and the anchor. Host logic: reads source text only."""
import pytest

from tools import mutants

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("name", list(mutants.MUTANTS))
def test_every_mutant_applies_to_submission_py(name):
    source = mutants.SUBMISSION.read_text()
    assert mutants.mutated_source(name, source) != source


def test_a_mutant_whose_anchor_moved_fails_by_name():
    source = mutants.SUBMISSION.read_text()
    anchor = mutants.MUTANTS["torch_route_x0.9"].edits[0].anchor
    with pytest.raises(mutants.MutantDoesNotApply, match=r"mutant torch_route_x0\.9: its anchor .* occurs 0 times"):
        mutants.mutated_source("torch_route_x0.9", source.replace(anchor, anchor.replace("return", "return  ")))
    with pytest.raises(mutants.MutantDoesNotApply, match="occurs 2 times"):
        mutants.mutated_source("torch_route_x0.9", source + anchor)


def test_the_command_lists_every_mutant(capsys):
    assert mutants.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in listed] == list(mutants.MUTANTS)
    assert all(line.endswith("; applies") for line in listed), listed
    assert mutants.main(["check", "no_such_mutant"]) == 2
