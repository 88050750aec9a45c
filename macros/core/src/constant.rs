//! The value of an expression the macro can compute: integer literals combined with
//! arithmetic, shifts, bit operations and casts. Anything else (a param, a call) is unknown,
//! and the rules that use a value say nothing about an unknown one.

use syn::{BinOp, Expr, Lit, UnOp};

use crate::ast::ungroup_expr;

/// The value of `expr`, when it is a constant integer expression that does not overflow.
pub fn value(expr: &Expr) -> Option<i128> {
    match ungroup_expr(expr) {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Int(int) => int.base10_parse::<i128>().ok(),
            _ => None,
        },
        Expr::Unary(unary) => match unary.op {
            UnOp::Neg(_) => value(&unary.expr)?.checked_neg(),
            _ => None,
        },
        // A cast to an integer type keeps a value that fits it; the rules only use values
        // that make sense before any truncation.
        Expr::Cast(cast) => value(&cast.expr),
        Expr::Binary(binary) => {
            let (a, b) = (value(&binary.left)?, value(&binary.right)?);
            match binary.op {
                BinOp::Add(_) => a.checked_add(b),
                BinOp::Sub(_) => a.checked_sub(b),
                BinOp::Mul(_) => a.checked_mul(b),
                BinOp::Div(_) => a.checked_div(b),
                BinOp::Rem(_) => a.checked_rem(b),
                BinOp::Shl(_) => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                BinOp::Shr(_) => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
                BinOp::BitAnd(_) => Some(a & b),
                BinOp::BitOr(_) => Some(a | b),
                BinOp::BitXor(_) => Some(a ^ b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The components of a launch dimension, `x`, `(x, y)` or `(x, y, z)`, each with its value
/// when constant. A dimension of another shape gives one unknown component.
pub fn dimensions(expr: &Expr) -> Vec<(&Expr, Option<i128>)> {
    match ungroup_expr(expr) {
        Expr::Tuple(tuple) if (1..=3).contains(&tuple.elems.len()) => {
            tuple.elems.iter().map(|e| (e, value(e))).collect()
        }
        expr => vec![(expr, value(expr))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(source: &str) -> Option<i128> {
        value(&syn::parse_str(source).expect("expression"))
    }

    #[test]
    fn constant_arithmetic_is_evaluated() {
        assert_eq!(eval("32 * 32 * 2"), Some(2048));
        assert_eq!(eval("(300 * 1024) as u32"), Some(307_200));
        assert_eq!(eval("1u32 << 10"), Some(1024));
        assert_eq!(eval("-5"), Some(-5));
        assert_eq!(eval("n * 2"), None);
        assert_eq!(eval("n.div_ceil(256)"), None);
        assert_eq!(eval("1 / 0"), None);
    }

    #[test]
    fn dimensions_split_tuples() {
        let expr: Expr = syn::parse_str("(32, 32, n)").expect("expression");
        let values: Vec<Option<i128>> = dimensions(&expr).into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, [Some(32), Some(32), None]);
    }
}
