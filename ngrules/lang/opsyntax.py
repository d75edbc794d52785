"""The parser's callbacks for `op Name(params) = body` (mixed into `parser.ToAst`).

Kept apart so the parser stays one screenful per concern; lark's tokens arrive as `str`
subclasses with `.value`, so nothing here imports lark.
"""

from __future__ import annotations

from ngrules.errors import RuleSyntaxError
from ngrules.lang.syntax import ETuple, OnnxTarget, OpDecl, OpParam


class OpDeclarations:
    """`op_decl` and `op_param` grammar callbacks; needs the parser's `src` and `_error`.
    They take the children as one list: lark's `v_args(inline=True)` on `ToAst` does not
    reach methods inherited from a base class."""

    def op_decl(self, children):
        keyword, name, *rest = children
        if keyword.value != "op":  # `op` is not reserved: any other first name is an error
            self._error(
                f"unexpected name {keyword.value!r}; expected a new 'rule', 'op', 'pass', "
                "'pipeline' or 'import'",
                keyword,
            )
        onnx = rest.pop() if rest and isinstance(rest[-1], OnnxTarget) else None
        *params, _rpar, body = rest
        items = body.items if isinstance(body, ETuple) else (body,)
        span, name_span = self.src.between(keyword, body), self.src.between(name)
        return OpDecl(name.value, tuple(params), items, span=span, name_span=name_span,
                      onnx=onnx)

    def onnx_clause(self, children):
        """`onnx [DOMAIN.]OP(attr=expr, ...)`: attributes by keyword only."""
        keyword, *rest = children
        names = [t for t in rest if getattr(t, "type", None) == "NAME"]
        arguments = [a for a in rest if getattr(a, "type", None) not in ("NAME", "LPAR", "RPAR")]
        attrs = []
        for a in arguments:
            if hasattr(a, "span"):  # an expression: positional (a keyword is not one yet)
                raise RuleSyntaxError(
                    "the ONNX op's attributes are given by name (onnx Op(alpha=0.1))", a.span
                )
            attrs.append((a.name.value, a.value))
        domain = ".".join(n.value for n in names[:-1])
        span = self.src.between(keyword, rest[-1])
        return OnnxTarget(names[-1].value, domain, tuple(attrs), span=span)

    def op_param(self, children):
        name, *rest = children
        kind = rest[0].value if rest and isinstance(rest[0], str) else None
        default = rest[-1] if rest and not isinstance(rest[-1], str) else None
        span = self.src.between(name, rest[-1] if rest else name)
        return OpParam(name.value, kind, default, span=span)
