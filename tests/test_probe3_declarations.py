"""Declarations that could never serve as meant are refused when they are made, naming the argument (probe 3):
rate limits and guards with values that block, disable or crash; `content_types=` given one string; middleware
that is not callable with (call, call_next); `async def` presenter callbacks (and a callback that returns a
coroutine anyway is an error at call time, never a rule of the agent's)."""

from __future__ import annotations

import datetime as dt
import enum
import functools
import math
import warnings
from typing import Annotated, Literal

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field, SecretBytes, SecretStr

from mcpfusion import ActionCall, Concurrency, Flatten, MCPFusion, Presenter, RateLimit, Timeout, Tool, image, ui
from mcpfusion.testing import ToolTester

NAN, INF = math.nan, math.inf


# -- 1: RateLimit ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"calls": 5, "burst": 0}, ValueError, r"burst= must be at least 1, not 0"),
    ({"calls": 5, "burst": -1}, ValueError, r"burst= must be at least 1, not -1"),
    ({"calls": 0}, ValueError, r"calls= must be at least 1"),
    ({"calls": 1.5}, TypeError, r"calls= takes a whole number"),
    ({"calls": True}, TypeError, r"calls= takes a whole number"),
    ({"calls": 5, "burst": 2.0}, TypeError, r"burst= takes a whole number"),
    ({"calls": 5, "per": NAN}, ValueError, r"per= must be a finite number of seconds above 0, not nan"),
    ({"calls": 1, "per": INF}, ValueError, r"per= must be a finite number of seconds above 0, not inf"),
    ({"calls": 5, "per": 0}, ValueError, r"per= must be a finite number"),
    ({"calls": 5, "per": -60}, ValueError, r"per= must be a finite number"),
    ({"calls": 5, "per": "60"}, TypeError, r"per= takes a number of seconds"),
])
def test_a_rate_limit_that_would_block_everything_disable_itself_or_crash_is_refused(kwargs, error, says):
    with pytest.raises(error, match=r"RateLimit " + says):
        RateLimit(**kwargs)


async def test_a_valid_rate_limit_still_limits():
    tool = Tool("t")

    @tool.action(readonly=True, middleware=[RateLimit(2, per=3600, burst=1)])
    async def ping() -> str:
        """Ping."""
        return "pong"

    tester = ToolTester(MCPFusion("x", tools=[tool]))
    codes = [(await tester.call("t", "ping")).error_code for _ in range(2)]
    assert codes == [None, "RATE_LIMITED"]


# -- 2: Timeout and Concurrency ------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [NAN, INF, -INF, 0, -1])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(seconds):
    with pytest.raises(ValueError, match=r"Timeout needs a positive number of seconds: seconds must be finite"):
        Timeout(seconds)


def test_a_timeout_of_text_is_refused():
    with pytest.raises(TypeError, match=r"Timeout seconds takes a number of seconds, not '10'"):
        Timeout("10")  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"limit": 2, "wait": NAN}, ValueError, r"wait must be finite and 0 or more, not nan"),
    ({"limit": 2, "wait": -1}, ValueError, r"wait must be finite and 0 or more"),
    ({"limit": 2, "retry_after": 0}, ValueError, r"retry_after must be finite and above 0"),
    ({"limit": 2.5}, TypeError, r"limit takes a whole number"),
])
def test_a_concurrency_guard_with_impossible_waits_is_refused(kwargs, error, says):
    with pytest.raises(error, match=r"Concurrency .*" + says):
        Concurrency(**kwargs)


def test_valid_guards_are_accepted():
    assert Timeout(0.05).seconds == 0.05
    assert Timeout(10).seconds == 10
    assert Concurrency(1, wait=0).wait == 0


# -- 3: content_types= -----------------------------------------------------------------------------------


def test_content_types_given_one_string_is_refused_not_read_as_its_characters():
    charts = Tool("charts")
    with pytest.raises(TypeError, match=r"action charts/chart: content_types= takes a list of MIME types, e\.g\. "
                                        r"content_types=\['image/png'\], not a string"):
        @charts.action(readonly=True, content_types="image/png")
        async def chart() -> object:
            """A chart."""
            return image(b"")
    assert not charts.actions


@pytest.mark.parametrize(("entry", "says"), [("png", "is not a MIME type"), ("image/*", "is a wildcard"),
                                             (42, "is not a MIME type")])
def test_a_content_type_that_is_no_single_mime_type_is_refused(entry, says):
    charts = Tool("charts")
    with pytest.raises(ValueError, match=f"content_types= entry .* {says}"):
        @charts.action(readonly=True, content_types=[entry])
        async def chart() -> object:
            """A chart."""
            return image(b"")


async def test_declared_content_types_are_compared_as_sent_types_are():
    charts = Tool("charts")

    @charts.action(readonly=True, content_types=["Image/PNG; q=1", "image/jpg"])
    async def chart() -> object:
        """A chart."""
        return image(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)

    assert charts.actions["chart"].content_types == frozenset({"image/png", "image/jpeg"})
    answer = await ToolTester([charts]).call("charts", "chart")
    assert answer.error_code is None, answer.text


# -- 4: middleware ----------------------------------------------------------------------------------------


async def _one_argument(call: ActionCall) -> None:  # forgot call_next
    return None


async def _fine(call, call_next):
    return await call_next(call)


@pytest.mark.parametrize(("middleware", "says"), [
    (["audit"], r"middleware 'audit' is not callable"),
    ([42], r"middleware 42 is not callable"),
    ("audit", r"middleware= takes a list of middleware"),
    ([_one_argument], r"middleware _one_argument\(call: 'ActionCall'\) -> 'None' cannot be called with "
                      r"\(call, call_next\)"),
    ([RateLimit], r"middleware RateLimit is a class: give an instance of it"),
    ([lambda call, call_next, extra: None], r"middleware <lambda>\(call, call_next, extra\) cannot be called"),
])
def test_middleware_that_cannot_take_call_and_call_next_is_refused_on_tool_action_and_app(middleware, says):
    with pytest.raises(TypeError, match=r"tool 't': " + says):
        Tool("t", middleware=middleware)
    tool = Tool("u")
    with pytest.raises(TypeError, match=r"action u/b: " + says):
        @tool.action(readonly=True, middleware=middleware)
        async def b() -> str:
            """B."""
            return "ok"
    assert not tool.actions
    # (the app keeps its list as a tuple first: one string is then refused by its first character)
    with pytest.raises(TypeError, match=r"the app: " + (says if not isinstance(middleware, str) else "middleware")):
        MCPFusion("x", tools=[Tool("v")], middleware=middleware).registry  # noqa: B018 (built on first use)


async def test_middleware_of_every_valid_form_is_accepted_and_runs():
    class Guard:
        async def __call__(self, call, call_next, *rest):
            return await call_next(call)

    async def with_default(call, call_next, note="x"):
        return await call_next(call)

    tool = Tool("t", middleware=[Guard(), functools.partial(with_default, note="y")])

    @tool.action(readonly=True, middleware=(_fine, RateLimit(5), Timeout(5)))
    async def a() -> str:
        """A."""
        return "ok"

    answer = await ToolTester(MCPFusion("x", tools=[tool], middleware=[_fine])).call("t", "a")
    assert answer.error_code is None and answer.text == "ok"


# -- 5: async presenter callbacks ------------------------------------------------------------------------


async def _async_ui(item):
    return ui.summary("x")


async def _async_lines(item):
    return ["Amounts are in cents."]


async def _async_generator(item):
    yield ui.summary("x")


class _AsyncCallable:
    async def __call__(self, item):
        return []


@pytest.mark.parametrize("builder", ["ui", "collection_ui", "suggest", "collection_suggest", "rules",
                                     "directives", "attach"])
@pytest.mark.parametrize("callback", [_async_ui, _async_lines, _async_generator, _AsyncCallable(),
                                      functools.partial(_async_ui)])
def test_an_async_presenter_callback_is_refused_at_declaration(builder, callback):
    presenter = Presenter("v").schema({"id": str})
    with pytest.raises(TypeError, match=rf"presenter 'v': Presenter\.{builder}\(\) takes a plain function \(def\), "
                                        r"but .* is async"):
        getattr(presenter, builder)(callback)


@pytest.mark.parametrize("builder", ["rules", "directives", "ui", "suggest"])
async def test_a_callback_returning_a_coroutine_anyway_fails_the_call_and_sends_nothing_of_it(builder, caplog):
    # A plain function wrapping an async one gets past the declaration's check: its coroutine is refused at
    # call time (INTERNAL_ERROR), never sent as a rule or directive, and closed (no "never awaited" warning).
    presenter = getattr(Presenter("v").schema({"id": str}), builder)(lambda item: _async_lines(item))
    billing = Tool("billing")

    @billing.action(readonly=True, returns=presenter)
    async def get() -> dict[str, str]:
        """Get."""
        return {"id": "inv_1"}

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        answer = await ToolTester([billing]).call("billing", "get")
    assert answer.error_code == "INTERNAL_ERROR", answer.text
    assert "coroutine" not in answer.text and "0x" not in answer.text
    assert "returned coroutine (it is async)" in caplog.text


# -- 6: two parameters sent under one key ---------------------------------------------------------------------


class Address(BaseModel):
    street: str
    city: str = Field(alias="town")


def _transfer_alias_first(source: Annotated[str, Field(alias="account")], account: str) -> str:
    """Move money."""
    return f"{source}>{account}"


def _transfer_name_first(account: str, source: str = Field(alias="account")) -> str:
    """Move money."""
    return f"{source}>{account}"


def _two_aliases(a: Annotated[str, Field(alias="x")], b: Annotated[str, Field(validation_alias="x")]) -> str:
    """Two aliases."""
    return a + b


def _alias_of_a_flattened_field(address: Annotated[Address, Flatten()], town: str) -> str:
    """An alias of a flattened field."""
    return town


@pytest.mark.parametrize(("fn", "says"), [
    (_transfer_alias_first, r"parameter 'account' is sent as 'account', and so is parameter 'source'"),
    (_transfer_name_first, r"parameter 'source' is sent as 'account', and so is parameter 'account'"),
    (_two_aliases, r"parameter 'b' is sent as 'x', and so is parameter 'a'"),
    (_alias_of_a_flattened_field, r"parameter 'town' is sent as 'town', and so is Address's field 'city' "
                                  r"\(flattened\)"),
])
def test_two_parameters_sent_under_one_key_are_refused_at_declaration(fn, says):
    tool = Tool("t", exposition="flat")
    with pytest.raises(TypeError, match=says + r": one key cannot set two parameters"):
        tool.action(destructive=True)(fn)
    assert not tool.actions


async def test_an_alias_that_clashes_with_nothing_is_accepted():
    tool = Tool("t", exposition="flat")

    @tool.action(destructive=True)
    async def transfer(source: Annotated[str, Field(alias="from")], account: str) -> str:
        """Move money."""
        return f"{source}>{account}"

    assert tool.actions["transfer"].input_schema["required"] == ["from", "account"]
    answer = await ToolTester([tool]).call("t", "transfer", {"from": "acc_1", "account": "acc_2"})
    assert answer.text == "acc_1>acc_2"


# -- 8: resources and prompts no read could serve ---------------------------------------------------------------


async def _other(other: str) -> str:
    return other


async def _takes_limit(id: str, limit: int) -> str:
    return f"{id}/{limit}"


async def _optional(id: str = "x") -> str:
    return id


async def _nothing() -> str:
    return "x"


@pytest.mark.parametrize(("template", "fn", "says"), [
    ("lib://a/{id}", _other, r"the function takes 'other', which no read could set"),
    ("lib://b/{id}", _takes_limit, r"the function takes 'limit', which no read could set"),
    ("lib://c/{id}", _nothing, r"the variable\(s\) 'id' are not taken by the function nor its dependencies"),
    ("lib://d/{id}/{page}", _takes_limit, r"the function takes 'limit'"),
])
def test_a_template_whose_variables_and_parameters_disagree_is_refused(template, fn, says):
    fusion = MCPFusion("lib")
    with pytest.raises(TypeError, match=rf"resource template '{template}': {says}"):
        fusion.resource_template(template)(fn)
    assert not fusion.resources.templates


def test_a_static_resource_whose_function_takes_an_argument_is_refused():
    fusion = MCPFusion("lib")
    with pytest.raises(TypeError, match=r"resource 'lib://one': the function takes 'other', which no read could "
                                        r"set \(a read gives the URI of a static resource"):
        fusion.resource("lib://one")(_other)


async def test_templates_whose_variables_are_taken_are_accepted_and_read():
    def load(id: str) -> str:
        return f"loaded {id}"

    async def by_dependency(item: str = Depends(load)) -> str:
        return item

    async def by_uri(uri: str) -> str:
        return uri

    async def by_kwargs(**values: str) -> str:
        return values["id"]

    fusion = MCPFusion("lib")
    fusion.resource_template("lib://dep/{id}")(by_dependency)
    fusion.resource_template("lib://uri/{id}")(by_uri)
    fusion.resource_template("lib://kw/{id}")(by_kwargs)
    fusion.resource_template("lib://opt/{id}")(_optional_limit)
    fusion.resource("lib://plain")(by_uri)
    read = fusion.resources.read
    assert (await read("lib://dep/7"))["contents"][0]["text"] == "loaded 7"
    assert (await read("lib://uri/7"))["contents"][0]["text"] == "lib://uri/7"
    assert (await read("lib://kw/7"))["contents"][0]["text"] == "7"
    assert (await read("lib://opt/7"))["contents"][0]["text"] == "7/10"
    assert (await read("lib://plain"))["contents"][0]["text"] == "lib://plain"


async def _optional_limit(id: str, limit: int = 10) -> str:
    return f"{id}/{limit}"


@pytest.mark.parametrize("uri", ["not a uri", "readme.txt", "/docs/readme", "lib://a b", "lib://a\nb", ""])
def test_a_resource_uri_that_is_no_uri_is_refused(uri):
    fusion = MCPFusion("lib")
    with pytest.raises(ValueError, match=r"resource URI .* is not a URI: write it as scheme:rest"):
        fusion.resource(uri)(_nothing)
    with pytest.raises(ValueError, match=r"resource template URI .* is not a URI"):
        fusion.resource_template(uri + "{id}")(_optional)
    assert not fusion.resources


def test_a_resource_uri_or_template_declared_twice_is_refused_and_the_first_kept():
    fusion = MCPFusion("lib")
    fusion.resource("lib://dup", name="first")(_nothing)
    with pytest.raises(ValueError, match=r"duplicate resource URI 'lib://dup': it is already read by 'first'"):
        fusion.resource("lib://dup", name="second")(_nothing)
    assert fusion.resources.resources["lib://dup"].name == "first"
    fusion.resource_template("lib://t/{id}")(_optional_limit)
    with pytest.raises(ValueError, match=r"duplicate resource template 'lib://t/\{id\}'"):
        fusion.resource_template("lib://t/{id}")(_optional_limit)
    assert len(fusion.resources.templates) == 1


class Tone(enum.Enum):
    FORMAL = "formal"


class Shape(BaseModel):
    sides: int


@pytest.mark.parametrize("annotation", [list[int], dict[str, int], Shape, list[str] | None, tuple[int, int]])
def test_a_prompt_argument_no_text_can_be_is_refused(annotation):
    def listy(items: str) -> str:
        """A prompt."""
        return "x"

    listy.__annotations__["items"] = annotation
    fusion = MCPFusion("lib")
    with pytest.raises(TypeError, match=r"prompt 'listy': argument 'items' has the type .*, which no text can be: "
                                        r"MCP sends prompt arguments as strings"):
        fusion.prompt()(listy)
    assert not fusion.prompts


async def test_prompt_arguments_text_converts_to_are_accepted():
    def review(n: int, ratio: float, flag: bool, day: dt.date, tone: Tone, mode: Literal["a", "b"],
               note: str | None = None, count: int | list[int] = 1) -> str:
        """Review."""
        return f"{n} {ratio} {flag} {day} {tone.value} {mode} {count}"

    fusion = MCPFusion("lib")
    fusion.prompt()(review)
    got = await fusion.prompts.get("review", {"n": "2", "ratio": "0.5", "flag": "true", "day": "2026-01-02",
                                              "tone": "formal", "mode": "a", "count": "3"})
    assert got["messages"][0]["content"]["text"] == "2 0.5 True 2026-01-02 formal a 3"


# -- 9: returns=<presenter> beside an output_schema= it contradicts ---------------------------------------------

INVOICE_VIEW = Presenter("invoice").schema({"id": str, "total_cents": int})


@pytest.mark.parametrize(("schema", "says"), [
    ({"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]},
     r"it requires 'number', which the presenter never sends"),
    ({"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False},
     r"it forbids 'total_cents', which the presenter always sends"),
    ({"type": "object", "properties": {"total_cents": {"type": "string"}}, "required": ["total_cents"]},
     r"it types 'total_cents' apart from the presenter"),
])
def test_an_output_schema_contradicting_the_presenter_is_refused_at_declaration(schema, says):
    tool = Tool("billing")
    with pytest.raises(TypeError, match=r"\(action billing/get_invoice\): output_schema= contradicts what its "
                                        rf"presenter answers \({says}\), so every call would fail"):
        @tool.action(readonly=True, returns=INVOICE_VIEW, output_schema=schema)
        async def get_invoice(id: str) -> dict[str, object]:
            """Get one invoice."""
            return {"id": id, "total_cents": 100}
    assert not tool.actions


@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ["id"]},
    {"type": "object", "properties": {"total_cents": {"type": "number"}}, "required": ["id", "total_cents"]},
    {"type": "object", "properties": {"id": {"type": "string"}, "total_cents": {"type": "integer"}},
     "additionalProperties": False},
])
async def test_an_output_schema_the_presenter_fits_is_accepted_and_answers(schema):
    tool = Tool("billing")

    @tool.action(readonly=True, returns=INVOICE_VIEW, output_schema=schema)
    async def get_invoice(id: str) -> dict[str, object]:
        """Get one invoice."""
        return {"id": id, "total_cents": 100}

    answer = await ToolTester([tool]).call("billing", "get_invoice", {"id": "inv_1"})
    assert answer.error_code is None, answer.text


# -- 10: a secret argument is never quoted back in a validation error -----------------------------------------


class Login(BaseModel):
    user: str
    password: SecretStr


def _accounts() -> Tool:
    acct = Tool("acct")

    @acct.action(destructive=True)
    async def set_password(user: str, password: Annotated[SecretStr, Field(min_length=12)],
                           spare: SecretBytes | None = None, logins: list[Login] | None = None,
                           pin: Annotated[int, Field(ge=1000, le=9999)] = 1234) -> str:
        """Set a password."""
        return "ok"

    @acct.action(destructive=True, input_schema={
        "type": "object", "properties": {"token": {"type": "string", "writeOnly": True, "minLength": 12},
                                         "note": {"type": "string", "maxLength": 3}}})
    async def set_token(token: str = "", note: str = "") -> str:
        """Set a token."""
        return "ok"

    return acct


@pytest.mark.parametrize(("action", "arguments", "field"), [
    ("set_password", {"user": "ada", "password": "hunter2"}, "password"),
    ("set_password", {"user": "ada", "password": ["hunter2-secret"]}, "password"),
    ("set_password", {"user": "ada", "password": "correct-horse", "spare": {"hunter2-secret": 1}}, "spare"),
    ("set_password", {"user": "ada", "password": "correct-horse",
                      "logins": [{"user": "x", "password": ["hunter2-secret"]}]}, "logins[0].password"),
    ("set_token", {"token": "hunter2"}, "token"),
])
async def test_a_secret_argument_is_never_quoted_back_on_mcp_or_rest(action, arguments, field):
    secret = "hunter2"
    acct = _accounts()
    answer = await ToolTester(MCPFusion("a", tools=[acct])).call("acct", action, arguments)
    assert answer.error_code == "VALIDATION_ERROR", answer.text
    assert f'<field name="{field}">' in answer.text
    assert secret not in answer.text and "You sent" not in answer.text
    client = TestClient(MCPFusion("a", tools=[_accounts()]).build_app())
    problem = client.post(f"/api/acct/{action}", json=arguments)
    assert problem.status_code == 422 and secret not in problem.text, problem.text


async def test_an_argument_that_is_no_secret_is_still_quoted_back():
    answer = await ToolTester([_accounts()]).call("acct", "set_password",
                                                  {"user": "ada", "password": "correct-horse", "pin": 99999})
    assert "You sent: 99999." in answer.text
    answer = await ToolTester([_accounts()]).call("acct", "set_token", {"note": "abcdef"})
    assert "You sent: \"abcdef\"." in answer.text


# -- 12: a type checker catches the same mistakes ---------------------------------------------------------------

MISTYPED_MODULE = '''
from mcpfusion import ActionCall, CallNext, Presenter, ToolResponse, Tool, ui, suggest


async def summary(inv: dict[str, object]) -> ui.UIBlock:
    return ui.summary("x")


async def rules(inv: dict[str, object]) -> list[str]:
    return ["Amounts are in cents."]


def plain_ui(inv: dict[str, object]) -> list[ui.UIBlock]:
    return [ui.summary("x")]


def plain_rules(inv: dict[str, object]) -> list[str]:
    return ["Amounts are in cents."]


async def audit(call: ActionCall, call_next: CallNext) -> ToolResponse:
    return await call_next(call)


async def one_argument(call: ActionCall) -> ToolResponse:
    raise NotImplementedError


fine = (Presenter("v").schema({"id": str}).ui(plain_ui).rules(plain_rules).rules(["x"])
        .suggest(lambda inv: [suggest("t.a", "again")]))
Tool("fine", middleware=[audit])

Presenter("a").ui(summary)                         # 1: async
Presenter("b").rules(rules)                        # 2: async
Presenter("c").directives(rules)                   # 3: async
Presenter("d").ui(lambda inv: "plain text")        # 4, 5: a str is no block
Tool("t", middleware=["not a middleware", 42])     # 6, 7: not callables
Tool("u", middleware=[one_argument])               # 8: no call_next
'''


@pytest.mark.timeout(300)
def test_mypy_strict_refuses_async_callbacks_and_middleware_that_are_none(tmp_path):
    import subprocess
    import sys
    import textwrap

    (tmp_path / "user_module.py").write_text(textwrap.dedent(MISTYPED_MODULE))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "user_module.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    lines = sorted({int(line.split(":")[1]) for line in done.stdout.splitlines() if ": error:" in line})
    source = textwrap.dedent(MISTYPED_MODULE).splitlines()
    flagged = [source[n - 1].split("#")[-1].strip() for n in lines]
    assert flagged == ["1: async", "2: async", "3: async", "4, 5: a str is no block", "6, 7: not callables",
                       "8: no call_next"], done.stdout


async def test_content_refused_for_its_type_does_not_ask_the_agent_for_less():
    charts = Tool("charts")

    @charts.action(readonly=True, content_types=["image/jpeg"])
    async def chart() -> object:
        """A chart."""
        return image(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)

    answer = await ToolTester([charts]).call("charts", "chart")
    assert answer.error_code == "CONTENT_REFUSED"
    assert "this action sends only image/jpeg" in answer.text
    assert "smaller" not in answer.text and "This is a server problem" in answer.text
