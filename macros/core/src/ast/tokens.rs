//! Token helpers every phase uses: looking through `macro_rules!` groups, and types and
//! expressions as the user wrote them, for messages.

use super::*;

/// Looks through the invisible groups that `macro_rules!` puts around `$t:ty`, and through
/// parentheses, which never change a type.
pub fn ungroup_type(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Group(group) => ty = &group.elem,
            Type::Paren(paren) => ty = &paren.elem,
            _ => return ty,
        }
    }
}

/// Looks through invisible groups (`$e:expr`) and parentheses around an expression.
pub fn ungroup_expr(mut expr: &Expr) -> &Expr {
    loop {
        match expr {
            Expr::Group(group) => expr = &group.expr,
            Expr::Paren(paren) => expr = &paren.expr,
            _ => return expr,
        }
    }
}

/// The ident an expression consists of, if it is a bare name such as `field`.
pub fn bare_ident(expr: &Expr) -> Option<&Ident> {
    match ungroup_expr(expr) {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => path.path.get_ident(),
        _ => None,
    }
}

/// Tokens printed the way a person writes them: `&mut DeviceBuffer<f32>`, not
/// `& mut DeviceBuffer < f32 >`, for messages and for comparing types by spelling.
pub fn tokens_string<T: ToTokens>(tokens: &T) -> String {
    // The compiler's printer breaks a long stream into lines: one line for a message.
    let mut text = tokens
        .to_token_stream()
        .to_string()
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        ("& ", "&"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        (" ;", ";"),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" (", "("),
        (" .", "."),
        (" !(", "!("),
        (" ![", "!["),
        (" !{", "!{"),
        ("* mut ", "*mut "),
        ("* const ", "*const "),
        (". ", "."),
    ] {
        text = text.replace(from, to);
    }
    text
}

/// A type as the user writes it, looking through invisible groups.
pub fn type_string(ty: &Type) -> String {
    tokens_string(ungroup_type(ty))
}
