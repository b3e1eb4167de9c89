"""The reference service's declarations for the type checker say what runs.

`routers/billing.py` declares, under `if TYPE_CHECKING:`, the input models that `Model.input_model` builds at
run time (mypy cannot run it). Those declarations must name exactly the fields of the built models, in their
order, with the same types: otherwise the service would type-check against models it does not serve.
"""

import ast
import inspect
import typing

import pytest

import routers.billing as billing


def _declared_for_the_type_checker() -> dict[str, type]:
    """The classes of the module's `if TYPE_CHECKING:` block, defined in the module's namespace."""
    tree = ast.parse(inspect.getsource(billing))
    block = next(
        node for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    )
    namespace = dict(vars(billing))
    exec(compile(ast.Module(body=block.body, type_ignores=[]), billing.__file__, "exec"), namespace)
    return {node.name: namespace[node.name] for node in block.body if isinstance(node, ast.ClassDef)}


DECLARED = _declared_for_the_type_checker()


def test_every_runtime_input_model_is_declared() -> None:
    assert sorted(DECLARED) == ["InvoiceCreate", "InvoiceUpdate", "PaymentCreate"]


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declared_fields_are_the_built_models_fields(name: str) -> None:
    built = getattr(billing, name)
    assert getattr(built, "__mcpfusion_flatten__", False), f"{name} is not a Model's input model at run time"
    declared = typing.get_type_hints(DECLARED[name])
    assert list(declared) == list(built.model_fields)
    assert declared == {field: info.annotation for field, info in built.model_fields.items()}
