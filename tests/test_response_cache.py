"""The blocks `assemble` reads back from its caches are the blocks it would render: a response's one
suggestion (plain strings only: a string subclass renders as it formats itself), and the egress guard's
forms of a removed value (`censor._long_forms`), whatever the cache held before."""

from __future__ import annotations

from mcpfusion import censor, markup
from mcpfusion.response import Suggestion, assemble, response


class Loud(str):
    def __format__(self, spec: str) -> str:
        return self.upper()


def _suggestions_block(suggestions: list[Suggestion]) -> str:
    return assemble({"id": 1}, False, [], [], [], [], suggestions).texts[-1]


def test_one_suggestion_block_is_its_rendered_block_every_time():
    for action, reason in [("billing.remind", "Send a reminder"), ("a", '<b> & "c"'), ("x", "")]:
        expected = markup.bullet_block("action_suggestions", [f"{action}: {reason}"])
        assert _suggestions_block([Suggestion(action, reason)]) == expected  # rendered, then cached
        assert _suggestions_block([Suggestion(action, reason)]) == expected  # read back
    plain = _suggestions_block([Suggestion("go", "now")])
    loud = _suggestions_block([Suggestion(Loud("go"), "now")])  # equal key, another rendering
    assert plain == "<action_suggestions>\n- go: now\n</action_suggestions>"
    assert loud == "<action_suggestions>\n- GO: now\n</action_suggestions>"
    assert _suggestions_block([Suggestion("go", "now"), Suggestion("go", "later")]).count("- go:") == 2
    built = response({"id": 1}).suggest([Suggestion("go", "now")]).build()
    assert built.texts[-1] == plain


def test_guard_forms_cache_gives_the_forms_of_each_value():
    texts = ['{"id":"x"}', "<domain_rules>\n- Call Zoë &lt;ceo> now\n</domain_rules>"]
    censor._long_forms.clear()
    for _ in range(2):  # the forms computed, then read back
        assert censor._clean(texts, ["ada@example.com", None])
        assert not censor._clean(texts, ["Zoë <ceo>"])  # found in its escaped form
    # (the forms' keys: looked for in the blocks case-folded, `censor._key`)
    assert censor._long_forms["Zoë <ceo>"] == tuple(dict.fromkeys(f.lower() for f in censor._variants("Zoë <ceo>")))
    assert censor._long_forms["ada@example.com"] == "ada@example.com"  # plain: its one form
