//! Kernel bounds: the `n` of `y: &mut [f32; n]` read as `scale × p₁ × … × pₖ + offset` over
//! the kernel's integer parameters, the one shape the runtime checks (`gpu_pipeline::Bound`).
//!
//! ```text
//! BOUND   := PRODUCT [+ INT] | INT + PRODUCT
//! PRODUCT := FACTOR (* FACTOR)*          at most MAX_FACTORS parameters
//! FACTOR  := NAME | INT | ( PRODUCT )    NAME: an integer scalar parameter of the kernel
//! ```
//!
//! One pure function, [`resolve`], used by `check` (which reports its errors on the user's
//! tokens) and by lowering (which keeps its result for code generation).

use syn::{BinOp, Expr, Ident, Lit, LitInt, Type};

use crate::ast::{self, KernelParamType, bare_ident, type_string, ungroup_expr, ungroup_type};
use crate::symbol::{INDEX_SCALARS, PRIMITIVE_SCALARS};

/// The most parameters one bound multiplies: the runtime's `MAX_BOUND_FACTORS`.
pub const MAX_FACTORS: usize = 4;

/// A bound, resolved: `scale × factors… + offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound<'a> {
    /// The product of the integer literals multiplied (1 when there are none).
    pub scale: u64,
    /// Each parameter multiplied: its position in the kernel's signature and the name as
    /// written in the bound (for spans).
    pub factors: Vec<(usize, &'a Ident)>,
    /// The literal added (0 when there is none).
    pub offset: u64,
}

/// What is wrong with one bound, on the tokens to report it at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundError<'a> {
    /// An expression outside the grammar above (`n - 1`, `n / 2`, `(n + 2) * m`, `n as u32`).
    Unsupported(&'a Expr),
    /// A name that is no parameter of the kernel.
    Unknown(&'a Ident),
    /// A name of one of the kernel's buffer parameters.
    Buffer(&'a Ident),
    /// A scalar parameter whose declared type is known not to be an integer (`f32`, an
    /// array); other spellings (aliases) are asserted by the compiler.
    NotInteger {
        /// The name in the bound.
        ident: &'a Ident,
        /// The parameter's type as written.
        ty: String,
    },
    /// More than [`MAX_FACTORS`] parameters.
    TooManyFactors(&'a Expr),
    /// A literal, or the product of the literals, or the sum, beyond `u64`.
    Overflow(&'a Expr),
}

/// One factor as written.
enum Term<'a> {
    Name(&'a Ident),
    Literal(&'a LitInt),
}

/// Reads `expr`, the bound of one of `kernel`'s buffer parameters: the bound, or every
/// error found in it.
pub fn resolve<'a>(
    kernel: &'a ast::Kernel,
    expr: &'a Expr,
) -> Result<Bound<'a>, Vec<BoundError<'a>>> {
    let Some((terms, offset)) = sum(expr) else {
        return Err(vec![BoundError::Unsupported(expr)]);
    };
    let mut errors = Vec::new();
    let mut scale: Option<u64> = Some(1);
    let mut factors = Vec::new();
    for term in terms {
        match term {
            Term::Literal(literal) => match literal.base10_parse::<u64>() {
                Ok(value) => scale = scale.and_then(|s| s.checked_mul(value)),
                Err(_) => scale = None,
            },
            Term::Name(ident) => match parameter(kernel, ident) {
                Ok(position) => factors.push((position, ident)),
                Err(error) => errors.push(error),
            },
        }
    }
    if factors.len() > MAX_FACTORS {
        errors.push(BoundError::TooManyFactors(expr));
    }
    let offset = match offset {
        None => Some(0),
        Some(literal) => literal.base10_parse::<u64>().ok(),
    };
    match (scale, offset) {
        (Some(scale), Some(offset)) if errors.is_empty() => Ok(Bound {
            scale,
            factors,
            offset,
        }),
        (Some(_), Some(_)) => Err(errors),
        _ => {
            errors.push(BoundError::Overflow(expr));
            Err(errors)
        }
    }
}

/// `PRODUCT [+ INT]` or `INT + PRODUCT`: the factors and the literal added.
fn sum(expr: &Expr) -> Option<(Vec<Term<'_>>, Option<&LitInt>)> {
    let mut terms = Vec::new();
    match ungroup_expr(expr) {
        Expr::Binary(binary) if matches!(binary.op, BinOp::Add(_)) => {
            let (product_side, literal) =
                match (int_literal(&binary.left), int_literal(&binary.right)) {
                    (_, Some(literal)) => (&*binary.left, literal),
                    (Some(literal), None) => (&*binary.right, literal),
                    (None, None) => return None,
                };
            product(product_side, &mut terms).then_some((terms, Some(literal)))
        }
        _ => product(expr, &mut terms).then_some((terms, None)),
    }
}

/// `FACTOR (* FACTOR)*`, appended to `terms`; `false` for anything else.
fn product<'a>(expr: &'a Expr, terms: &mut Vec<Term<'a>>) -> bool {
    match ungroup_expr(expr) {
        Expr::Binary(binary) if matches!(binary.op, BinOp::Mul(_)) => {
            product(&binary.left, terms) && product(&binary.right, terms)
        }
        inner => {
            if let Some(literal) = int_literal(inner) {
                terms.push(Term::Literal(literal));
                true
            } else if let Some(ident) = bare_ident(inner) {
                terms.push(Term::Name(ident));
                true
            } else {
                false
            }
        }
    }
}

fn int_literal(expr: &Expr) -> Option<&LitInt> {
    match ungroup_expr(expr) {
        Expr::Lit(literal) if literal.attrs.is_empty() => match &literal.lit {
            Lit::Int(int) => Some(int),
            _ => None,
        },
        _ => None,
    }
}

/// The position of the integer scalar parameter `ident` names.
fn parameter<'a>(kernel: &'a ast::Kernel, ident: &'a Ident) -> Result<usize, BoundError<'a>> {
    let (position, param) = kernel
        .params
        .iter()
        .enumerate()
        .find(|(_, param)| param.name == *ident)
        .ok_or(BoundError::Unknown(ident))?;
    match param.kind() {
        KernelParamType::Scalar(ty) if maybe_integer(ty) => Ok(position),
        KernelParamType::Scalar(ty) => Err(BoundError::NotInteger {
            ident,
            ty: type_string(ty),
        }),
        KernelParamType::Slice { .. } => Err(BoundError::Buffer(ident)),
        // Reported with the signature; nothing more to say here.
        KernelParamType::Condition | KernelParamType::Unsupported => Err(BoundError::NotInteger {
            ident,
            ty: type_string(&param.ty),
        }),
    }
}

/// Whether a scalar type may be an integer: an integer primitive, or a path the macro cannot
/// judge (`type Len = u32`), which the generated code asserts. Other primitives, arrays and
/// tuples are not.
pub fn maybe_integer(ty: &Type) -> bool {
    match ungroup_type(ty) {
        Type::Path(_) => {
            let spelled = type_string(ty);
            INDEX_SCALARS.contains(&spelled.as_str())
                || !PRIMITIVE_SCALARS.contains(&spelled.as_str())
        }
        _ => false,
    }
}

/// The names of `kernel`'s parameters a bound may name, for "did you mean".
pub fn integer_parameters(kernel: &ast::Kernel) -> Vec<String> {
    kernel
        .params
        .iter()
        .filter(|param| matches!(param.kind(), KernelParamType::Scalar(ty) if maybe_integer(ty)))
        .map(|param| param.name.to_string())
        .collect()
}
