"""Round 7, docs examples and samples: the curl example and try-it form send the headers and cookies an action's
dependencies require; the docs render presenters' blocks through the egress guard and never plant a literal of
the code into a redacted field's sample."""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

from fastapi import Cookie, Depends, Header
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Presenter, Tool, suggest, ui
from mcpfusion.docs import presenters
from mcpfusion.docs.export import export_site
from mcpfusion.docs.manifest import build_manifest


async def tenant(x_tenant: Annotated[str, Header()]) -> str:
    return x_tenant


async def region(x_region: Annotated[str, Header(examples=["eu-west"])]) -> str:
    return x_region


async def session(sid: Annotated[str, Cookie()]) -> str:
    return sid


async def trace(x_trace: Annotated[str | None, Header()] = None) -> str | None:
    return x_trace


async def auth(authorization: Annotated[str, Header()]) -> str:
    return authorization


def headed_app() -> Any:
    t = Tool("orders")

    @t.action(readonly=True)
    async def get_order(id: str, who: str = Depends(tenant), where: str = Depends(region),
                        sid: str = Depends(session), tr: Any = Depends(trace), au: str = Depends(auth)) -> dict:
        """Get an order."""
        return {"id": id, "tenant": who, "region": where, "sid": sid, "trace": tr}

    return MCPFusion("orders", tools=[t]).build_app()


def run_curl(client: TestClient, curl: str) -> Any:
    """Send what the documented curl example sends (its token filled in)."""
    argv = shlex.split(curl.replace("\\\n", " "))
    headers: dict[str, str] = {}
    body, url, i = None, None, 1
    while i < len(argv):
        if argv[i] == "-H":
            key, value = argv[i + 1].split(":", 1)
            headers[key.strip()] = value.strip()
            i += 2
        elif argv[i] in ("-d", "-X"):
            body = argv[i + 1] if argv[i] == "-d" else body
            i += 2
        else:
            url, i = argv[i], i + 1
    assert url is not None
    headers["Authorization"] = "Bearer anything"
    return client.post(url.replace("http://testserver", ""), content=body, headers=headers)


def test_the_curl_example_sends_the_required_headers_and_cookies_and_runs():
    client = TestClient(headed_app())
    action = client.get("/tools.json").json()["tools"][0]["actions"][0]
    curl = action["examples"]["curl"]
    assert "-H 'x-tenant: x-tenant_1'" in curl and "-H 'x-region: eu-west'" in curl  # (the schema's example)
    assert "-H 'Cookie: sid=sid_1'" in curl
    assert "x-trace" not in curl  # optional: not sent
    assert curl.count("Authorization") == 1  # the Authorization header stays as it is
    response = run_curl(client, curl)
    assert response.status_code == 200, response.text
    assert response.json() == {"id": "id_1", "tenant": "x-tenant_1", "region": "eu-west", "sid": "sid_1",
                               "trace": None}
    listed = {(p["in"], p["name"]): (p["required"], p["example"]) for p in action["request_parameters"]}
    assert listed == {("header", "x-tenant"): (True, "x-tenant_1"), ("header", "x-region"): (True, "eu-west"),
                      ("cookie", "sid"): (True, "sid_1"), ("header", "x-trace"): (False, "x-trace_1"),
                      ("header", "authorization"): (True, "authorization_1")}


def test_the_page_lists_the_headers_and_the_try_it_form_has_a_field_per_required_one():
    page = TestClient(headed_app()).get("/tools").text
    assert "<h4>Headers and cookies</h4>" in page and "<code>x-trace</code>" in page
    assert 'data-header="x-tenant" value="x-tenant_1"' in page
    assert 'data-header="x-region" value="eu-west"' in page
    assert 'data-cookie="sid" value="sid_1"' in page
    assert 'data-header="x-trace"' not in page and 'data-header="authorization"' not in page
    assert "-H &#x27;x-tenant: x-tenant_1&#x27;" in page  # the curl example shown


def test_the_static_export_sends_the_headers_too(tmp_path):
    app = headed_app()
    export_site(app, tmp_path, base_url="https://api.example.com")
    curl = json.loads((tmp_path / "tools.json").read_text())["tools"][0]["actions"][0]["examples"]["curl"]
    assert curl.startswith("curl -X POST https://api.example.com/api/orders/get_order")
    assert "-H 'x-tenant: x-tenant_1'" in curl and "-H 'Cookie: sid=sid_1'" in curl
    assert 'data-header="x-tenant"' in (tmp_path / "index.html").read_text()


def test_an_action_reading_no_header_keeps_its_curl_example():
    t = Tool("plain")

    @t.action(readonly=True)
    async def get(id: str) -> dict:
        """Get."""
        return {"id": id}

    action = TestClient(MCPFusion("plain", tools=[t]).build_app()).get("/tools.json").json()["tools"][0]["actions"][0]
    assert action["request_parameters"] == []
    assert action["examples"]["curl"] == ("curl -X POST http://testserver/api/plain/get \\\n"
                                          '  -H "Authorization: Bearer $TOKEN" \\\n'
                                          "  -H 'Content-Type: application/json' \\\n"
                                          "  -d '{\"id\": \"id_1\"}'")


class Emp(BaseModel):
    id: str
    email: str = Field(examples=["jane.realperson@corp.example"])
    salary: int = Field(examples=[123456])
    status: str = "active"


def employee_app(view: Presenter) -> Any:
    t = Tool("hr", exposition="flat")

    @t.action(readonly=True, returns=view)
    async def get(id: str) -> dict:
        """Get an employee."""
        return {"id": id, "email": "x@y.z", "salary": 1}

    @t.action()
    async def remind(id: str) -> str:
        """Remind."""
        return id

    return MCPFusion("hr", tools=[t]).build_app()


def leaky_view() -> Presenter:
    return (Presenter("emp").schema(Emp).redact_pii(["email", "salary"])
            .ui(lambda e: ui.markdown("x", title=f"card of {e['email']}"))
            .rules(lambda e: [f"salary is {e['salary']}", "VIP" if e["email"] == "ceo.private@corp.example" else None,
                              "Late." if e["status"] == "late" else None])
            .directives(lambda e: [f"Never write {e['email']}."])
            .suggest(lambda e: [suggest("hr.remind", f"mail {e['email']}")]))


def test_the_docs_show_presenter_blocks_as_the_agent_sees_them_redacted_values_censored():
    client = TestClient(employee_app(leaky_view()))
    bodies = {path: client.get(path).text for path in ("/tools", "/tools.json", "/tools.toon")}
    for path, body in bodies.items():
        for secret in ("jane.realperson", "123456", "ceo.private"):
            assert secret not in body, (path, secret)
    info = client.get("/tools.json").json()["tools"][0]["actions"][0]["presenters"][0]
    assert info["rules"] == ["salary is [REDACTED]", "Late."]  # a literal tested on an unredacted field: planted
    assert info["suggestions"] == [{"action": "hr.remind", "reason": "mail [REDACTED]"}]
    assert info["ui_blocks"] == [{"type": "markdown", "title": "card of [REDACTED]"}]
    assert info["directives"] == ["Never write [REDACTED]."]


def test_a_literal_of_the_code_is_never_planted_into_a_redacted_field():
    view = leaky_view()
    items = presenters.sample_items(view, 6)
    assert "ceo.private@corp.example" not in {i["email"] for i in items}
    assert "late" in {i["status"] for i in items}  # an unredacted field still takes what its callbacks test

    class Line(BaseModel):
        sku: str
        card: str

    class Order(BaseModel):
        id: str
        lines: list[Line]

    child = Presenter("line").schema(Line).rules(lambda ln: ["Gift." if ln["card"] == "4111-1111" else None])
    parent = Presenter("order").schema(Order).redact_pii(["lines[*].card"]).embed("lines", child)
    cards = {line["card"] for v in range(6) for line in presenters.sample_item(parent, v)["lines"]}
    assert "4111-1111" not in cards
    assert presenters.sample_item(child, 1)["card"] == "4111-1111"  # alone, nothing redacts it: planted


def test_an_alias_named_redaction_keeps_the_literal_out_too():
    class Person(BaseModel):
        mail: str = Field(alias="eMail")

    # The path names the field, the callback (and the sample) its alias.
    view = (Presenter("p").schema(Person).redact_pii(["mail"])
            .rules(lambda p: ["boss" if p["eMail"] == "boss@corp.example" else None]))
    assert presenters.tested_values(view) == {"eMail": ["boss@corp.example"]}
    assert all(i.get("mail") != "boss@corp.example" and i.get("eMail") != "boss@corp.example"
               for i in presenters.sample_items(view, 6))


def test_the_manifest_of_a_registry_guards_the_blocks_too():
    registry = employee_app(leaky_view()).state.mcpfusion.registry
    text = json.dumps(build_manifest(registry))
    assert "jane.realperson" not in text and "ceo.private" not in text and "[REDACTED]" in text



class Customer(BaseModel):
    name: str
    email: str = Field(examples=["vip.customer@corp.example"])


class Invoice(BaseModel):
    id: str
    customer: Customer


def test_a_parents_redaction_into_an_embed_guards_and_keeps_literals_out_of_the_childs_card():
    child = (Presenter("customer").schema(Customer)
             .rules(lambda c: [f"Write to {c['email']}.", "Top." if c["email"] == "top.secret@corp.example" else None])
             .suggest(lambda c: [suggest("billing.mail", f"mail {c['email']}")]))
    parent = Presenter("invoice").schema(Invoice).redact_pii(["customer.email"]).embed("customer", child)
    text = json.dumps(presenters.describe(parent, None, many=False))
    assert "vip.customer" not in text and "top.secret" not in text and "Top." not in text
    card = presenters.describe(parent, None, many=False)["embeds"][0]["presenter"]
    assert card["rules"] == ["Write to [REDACTED]."]
    assert card["suggestions"] == [{"action": "billing.mail", "reason": "mail [REDACTED]"}]
    # Alone, nothing redacts the email: the child's own description shows what its agent sees.
    assert "Write to vip.customer@corp.example." in presenters.describe(child, None, many=False)["rules"]
    assert presenters._inside(("customer.email", "*.ssn", "lines[*].card", "other"), "customer") == ("email", "ssn")
    assert presenters._inside(("customer", '*["a.b"][*].c'), "customer") == ("", '["a.b"][*].c')
