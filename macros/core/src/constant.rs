//! The value of an expression the macro can compute: integer literals combined with
//! arithmetic, shifts, bit operations and casts. Anything else (a param, a call) is unknown,
//! and the rules that use a value say nothing about an unknown one.
//!
//! Inside a `for` the same expressions may name the loop variable and the loop's `let`s:
//! [`value_in`] evaluates them for one iteration, and [`Poly`] keeps them as polynomials
//! over the loop variable and the params, to compare iterations whose bounds are not
//! constants (`i * s .. (i + 1) * s` and the next iteration's range).

use std::collections::BTreeMap;

use syn::{BinOp, Expr, Ident, Lit, UnOp};

use crate::ast::ungroup_expr;

/// The value of `expr`, when it is a constant integer expression that does not overflow.
pub fn value(expr: &Expr) -> Option<i128> {
    value_in(expr, &|_| None)
}

/// The value of `expr` where `names` gives some names a value (a loop variable and `let`s
/// in one iteration): integer literals, those names, arithmetic, shifts, bit operations,
/// casts, and `a.min(b)`, `a.max(b)`. Anything else is unknown.
pub fn value_in(expr: &Expr, names: &dyn Fn(&Ident) -> Option<i128>) -> Option<i128> {
    let value = |e: &Expr| value_in(e, names);
    match ungroup_expr(expr) {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Int(int) => int.base10_parse::<i128>().ok(),
            _ => None,
        },
        Expr::Path(path) => names(path.path.get_ident()?),
        Expr::Paren(paren) => value(&paren.expr),
        Expr::Unary(unary) => match unary.op {
            UnOp::Neg(_) => value(&unary.expr)?.checked_neg(),
            _ => None,
        },
        // A cast gives what Rust's `as` gives: an integer type keeps the low bits of the
        // value (`300 as u8` is 44, `-1i32 as u32` is 4294967295).
        Expr::Cast(cast) => cast_to(value(&cast.expr)?, &cast.ty),
        Expr::MethodCall(call) if call.args.len() == 1 => {
            let (a, b) = (value(&call.receiver)?, value(&call.args[0])?);
            match call.method.to_string().as_str() {
                "min" => Some(a.min(b)),
                "max" => Some(a.max(b)),
                _ => None,
            }
        }
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

/// `value as ty`, as Rust computes it, when `ty` is a primitive integer type (`usize` and
/// `isize` are 64 bits wide, as on every target CUDA supports). A float type saturates and
/// rounds, and another name may be an alias of any type: the value is kept only where it
/// is the same whatever the type (0 to 127), and is unknown otherwise.
fn cast_to(value: i128, ty: &syn::Type) -> Option<i128> {
    let width = match crate::ast::ungroup_type(ty) {
        syn::Type::Path(path) if path.qself.is_none() => {
            path.path
                .get_ident()
                .and_then(|ident| match ident.to_string().as_str() {
                    "u8" => Some((8, false)),
                    "u16" => Some((16, false)),
                    "u32" => Some((32, false)),
                    "u64" | "usize" => Some((64, false)),
                    "u128" => Some((128, false)),
                    "i8" => Some((8, true)),
                    "i16" => Some((16, true)),
                    "i32" => Some((32, true)),
                    "i64" | "isize" => Some((64, true)),
                    "i128" => Some((128, true)),
                    _ => None,
                })
        }
        _ => None,
    };
    let Some((bits, signed)) = width else {
        return (0..=127).contains(&value).then_some(value);
    };
    if bits == 128 {
        // Only `u128` of a negative value differs from `i128`, and it does not fit `i128`.
        return (signed || value >= 0).then_some(value);
    }
    let low = value & ((1i128 << bits) - 1);
    Some(if signed && low >= 1i128 << (bits - 1) {
        low - (1i128 << bits)
    } else {
        low
    })
}

/// `expr` with every part that evaluates (where `names` gives values) replaced by its value,
/// as text: `(i / 2) % lanes` is `(0 % lanes)` where `i` is 0 or 1. Two expressions of one
/// text have one value wherever the names left in them do.
pub fn folded(expr: &Expr, names: &dyn Fn(&Ident) -> Option<i128>) -> String {
    if let Some(value) = value_in(expr, names) {
        return value.to_string();
    }
    let fold = |e: &Expr| folded(e, names);
    match ungroup_expr(expr) {
        Expr::Paren(paren) => fold(&paren.expr),
        Expr::Binary(binary) => format!(
            "({} {} {})",
            fold(&binary.left),
            crate::ast::tokens_string(&binary.op),
            fold(&binary.right)
        ),
        Expr::Unary(unary) => {
            format!(
                "({}{})",
                crate::ast::tokens_string(&unary.op),
                fold(&unary.expr)
            )
        }
        Expr::Cast(cast) => format!(
            "({} as {})",
            fold(&cast.expr),
            crate::ast::tokens_string(&cast.ty)
        ),
        Expr::MethodCall(call) => {
            let args: Vec<String> = call.args.iter().map(fold).collect();
            format!(
                "{}.{}({})",
                fold(&call.receiver),
                call.method,
                args.join(", ")
            )
        }
        Expr::Call(call) => {
            let args: Vec<String> = call.args.iter().map(fold).collect();
            format!(
                "{}({})",
                crate::ast::tokens_string(&call.func),
                args.join(", ")
            )
        }
        other => crate::ast::tokens_string(other),
    }
}

/// A polynomial with integer coefficients over named unknowns (the loop variable, params,
/// `x.len()`): each product of unknowns, sorted, with its coefficient (none zero).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Poly(BTreeMap<Vec<String>, i128>);

impl Poly {
    /// The constant `c`.
    pub fn constant(c: i128) -> Poly {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(Vec::new(), c);
        }
        Poly(terms)
    }

    /// The unknown `name`.
    pub fn unknown(name: &str) -> Poly {
        Poly(BTreeMap::from([(vec![name.to_owned()], 1)]))
    }

    /// Its value when it has no unknown.
    pub fn as_constant(&self) -> Option<i128> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// `self + other`.
    pub fn add(&self, other: &Poly) -> Option<Poly> {
        let mut terms = self.0.clone();
        for (monomial, c) in &other.0 {
            let sum = terms.get(monomial).copied().unwrap_or(0).checked_add(*c)?;
            if sum == 0 {
                terms.remove(monomial);
            } else {
                terms.insert(monomial.clone(), sum);
            }
        }
        Some(Poly(terms))
    }

    /// `self - other`.
    pub fn sub(&self, other: &Poly) -> Option<Poly> {
        self.add(&other.scale(-1)?)
    }

    /// `c × self`.
    pub fn scale(&self, c: i128) -> Option<Poly> {
        let mut terms = BTreeMap::new();
        for (monomial, k) in &self.0 {
            let product = k.checked_mul(c)?;
            if product != 0 {
                terms.insert(monomial.clone(), product);
            }
        }
        Some(Poly(terms))
    }

    /// `self × other`.
    pub fn mul(&self, other: &Poly) -> Option<Poly> {
        let mut product = Poly::default();
        for (a, ka) in &self.0 {
            for (b, kb) in &other.0 {
                let mut monomial: Vec<String> = a.iter().chain(b).cloned().collect();
                monomial.sort();
                let term = Poly(BTreeMap::from([(monomial, ka.checked_mul(*kb)?)]));
                product = product.add(&term)?;
            }
        }
        Some(product)
    }

    /// `self` with `name` replaced by `by`.
    pub fn substitute(&self, name: &str, by: &Poly) -> Option<Poly> {
        let mut result = Poly::default();
        for (monomial, k) in &self.0 {
            let mut term = Poly::constant(*k);
            for unknown in monomial {
                let factor = if unknown == name {
                    by.clone()
                } else {
                    Poly::unknown(unknown)
                };
                term = term.mul(&factor)?;
            }
            result = result.add(&term)?;
        }
        Some(result)
    }

    /// Whether every coefficient is positive: the value is at least 0 wherever every unknown
    /// is (as indices, lengths and `usize` params are).
    pub fn nonnegative(&self) -> bool {
        self.0.values().all(|&k| k > 0)
    }

    /// The polynomial as Rust would write it: `(i + 1) * s` is `i * s + s`.
    pub fn render(&self) -> String {
        if self.0.is_empty() {
            return "0".to_owned();
        }
        let mut out = String::new();
        // Unknowns before the constant, as people write `i * s + 1`.
        let mut terms: Vec<(&Vec<String>, &i128)> = self.0.iter().collect();
        terms.sort_by_key(|(monomial, _)| monomial.is_empty());
        for (n, (monomial, &k)) in terms.into_iter().enumerate() {
            let magnitude = k.unsigned_abs();
            if n == 0 {
                if k < 0 {
                    out.push('-');
                }
            } else {
                out.push_str(if k < 0 { " - " } else { " + " });
            }
            let mut factors: Vec<String> = Vec::new();
            if magnitude != 1 || monomial.is_empty() {
                factors.push(magnitude.to_string());
            }
            factors.extend(monomial.iter().cloned());
            out.push_str(&factors.join(" * "));
        }
        out
    }
}

/// Whether every cast in `expr` keeps every bit of the value it casts: a cast to a type of 64
/// bits or more (`usize`, `u64`, `isize`, `i64`, `u128`, `i128`). A narrower one (`as u8`,
/// `as u32`), or one to a type spelled otherwise (an alias, a float), may change the value, so
/// that [`polynomial`], which reads casts as nothing, does not give the value of `expr`.
pub fn keeps_every_bit(expr: &Expr) -> bool {
    casts_keep(expr, 64)
}

/// Whether every cast in `expr` keeps its low `bits` bits (a cast to a type at least that
/// wide): where only those bits matter (a flag word of 32 bits), [`polynomial`] then gives
/// them, and `i as u32` is exact for a 32-bit flag where `i as u8` is not.
pub fn casts_keep(expr: &Expr, bits: u32) -> bool {
    match ungroup_expr(expr) {
        Expr::Cast(cast) => {
            let width = match crate::ast::tokens_string(&cast.ty).as_str() {
                "u8" | "i8" => 8,
                "u16" | "i16" => 16,
                "u32" | "i32" => 32,
                "usize" | "u64" | "isize" | "i64" => 64,
                "u128" | "i128" => 128,
                _ => 0,
            };
            width >= bits && casts_keep(&cast.expr, bits)
        }
        Expr::Binary(binary) => casts_keep(&binary.left, bits) && casts_keep(&binary.right, bits),
        Expr::Unary(unary) => casts_keep(&unary.expr, bits),
        Expr::Paren(paren) => casts_keep(&paren.expr, bits),
        _ => true,
    }
}

/// `expr` as a polynomial: integer literals, names (`names` gives a name's polynomial, a
/// loop variable's or a `let`'s, or `None` when it has none), `x.len()` as an unknown of its
/// own, `+`, `-`, `*`, unary `-`, parentheses and integer casts. Anything else (`/`, `%`,
/// a call) is `None`.
pub fn polynomial(expr: &Expr, names: &dyn Fn(&Ident) -> Option<Poly>) -> Option<Poly> {
    let poly = |e: &Expr| polynomial(e, names);
    match ungroup_expr(expr) {
        Expr::Lit(_) => Some(Poly::constant(value(expr)?)),
        Expr::Path(path) => names(path.path.get_ident()?),
        Expr::Paren(paren) => poly(&paren.expr),
        Expr::Unary(unary) => match unary.op {
            UnOp::Neg(_) => poly(&unary.expr)?.scale(-1),
            _ => None,
        },
        Expr::Cast(cast) => poly(&cast.expr),
        Expr::MethodCall(call) if call.method == "len" && call.args.is_empty() => {
            let receiver = crate::ast::bare_ident(&call.receiver)?;
            Some(Poly::unknown(&format!("{receiver}.len()")))
        }
        Expr::Binary(binary) => {
            let (a, b) = (poly(&binary.left)?, poly(&binary.right)?);
            match binary.op {
                BinOp::Add(_) => a.add(&b),
                BinOp::Sub(_) => a.sub(&b),
                BinOp::Mul(_) => a.mul(&b),
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
    fn casts_keep_what_rust_keeps() {
        assert_eq!(eval("300 as u8"), Some(44));
        assert_eq!(eval("(256u32 as u8) as usize"), Some(0));
        assert_eq!(eval("200u8 as i8"), Some(-56));
        assert_eq!(eval("-1i32 as u32"), Some(4_294_967_295));
        assert_eq!(eval("(1u64 << 32) as u32"), Some(0));
        assert_eq!(eval("-1i64 as usize"), Some(18_446_744_073_709_551_615));
        assert_eq!(eval("((1u64 << 63) as i64) as i128"), Some(-(1i128 << 63)));
        // A float saturates and rounds, and an alias may be any type.
        assert_eq!(eval("(16777217 as f32) as u32"), None);
        assert_eq!(eval("300 as Index"), None);
        assert_eq!(eval("7 as Index"), Some(7));
    }

    #[test]
    fn names_take_the_values_of_an_iteration() {
        let expr: Expr = syn::parse_str("(i + 1) % 4 * s.min(3)").expect("expression");
        let names = |name: &Ident| match name.to_string().as_str() {
            "i" => Some(3),
            "s" => Some(5),
            _ => None,
        };
        assert_eq!(value_in(&expr, &names), Some(0));
        let expr: Expr = syn::parse_str("(i + 2) % 4 * s.max(7)").expect("expression");
        assert_eq!(value_in(&expr, &names), Some(7));
        assert_eq!(value_in(&expr, &|_| None), None);
    }

    #[test]
    fn polynomials_compare_ranges_across_iterations() {
        let names = |name: &Ident| Some(Poly::unknown(&name.to_string()));
        let poly = |source: &str| {
            polynomial(&syn::parse_str(source).expect("expression"), &names).expect("polynomial")
        };
        let hi = poly("(i + 1) * s + 1");
        let next_lo = poly("i * s")
            .substitute("i", &poly("i + 1"))
            .expect("substitutes");
        assert_eq!(hi.sub(&next_lo).expect("difference").as_constant(), Some(1));
        assert_eq!(next_lo.render(), "i * s + s");
        assert_eq!(poly("2 * (n - 1) - 3").render(), "2 * n - 5");
        assert_eq!(poly("x.len() * 2").render(), "2 * x.len()");
        assert!(poly("i * s + s").nonnegative());
        assert!(!poly("i - 1").nonnegative());
        assert!(polynomial(&syn::parse_str("i / 2").expect("expression"), &names).is_none());
    }

    #[test]
    fn dimensions_split_tuples() {
        let expr: Expr = syn::parse_str("(32, 32, n)").expect("expression");
        let values: Vec<Option<i128>> = dimensions(&expr).into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, [Some(32), Some(32), None]);
    }
}
