//! Every name an expression mentions, and how: the raw material of the rules that account
//! for each appearance of a buffer in a statement, and of the setters that must know which
//! statements read a scalar.
//!
//! A mention is a path of one segment (`field`), an identifier inside a macro call's tokens
//! (`vec![field]`), or an inline argument of a format string (`println!("{step}")`). Names
//! that a closure parameter, a `let`, a `for` or a `match` arm binds inside the expression are
//! not mentions of the outer name.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Expr, Ident, Pat};

/// One appearance of a name.
#[derive(Debug, Clone)]
pub struct Mention {
    /// The name, with the span of its appearance.
    pub ident: Ident,
    /// How the expression uses it.
    pub use_: Use,
}

/// How an expression uses a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// `x.len()` or `x.is_empty()`: a buffer's length, which is host-side metadata (or
    /// `xs[k].len()`, the length of one element of an array of buffers).
    Length,
    /// The receiver of a method whose name ends in `_mut` (`x.as_view_mut()`): a mutable use.
    MutMethod(String),
    /// Any other use: the value itself, a field, a method, a reference, a macro argument.
    Other,
}

/// Every name `expr` mentions, in source order.
pub fn mentions(expr: &Expr) -> Vec<Mention> {
    let mut finder = Finder::default();
    finder.visit_expr(expr);
    finder.found
}

/// Every name in a token stream that no parser can see into (a macro call's arguments):
/// identifiers, and inline arguments of string literals used as format strings.
pub fn token_mentions(tokens: TokenStream) -> Vec<Mention> {
    let mut found = Vec::new();
    collect_tokens(tokens, &mut found);
    found
}

#[derive(Default)]
struct Finder {
    /// Names bound inside the expression, innermost last.
    bound: Vec<String>,
    found: Vec<Mention>,
}

impl Finder {
    fn push(&mut self, ident: &Ident, use_: Use) {
        if !self.bound.iter().any(|name| ident == name) {
            self.found.push(Mention {
                ident: ident.clone(),
                use_,
            });
        }
    }

    fn with_bound(&mut self, pats: &[&Pat], f: impl FnOnce(&mut Self)) {
        let depth = self.bound.len();
        for pat in pats {
            bind(pat, &mut self.bound);
        }
        f(self);
        self.bound.truncate(depth);
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_path(&mut self, path: &'ast syn::ExprPath) {
        match path.path.get_ident() {
            Some(ident) if path.qself.is_none() => self.push(ident, Use::Other),
            _ => visit::visit_expr_path(self, path),
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let length = call.args.is_empty() && (call.method == "len" || call.method == "is_empty");
        // `xs[k].len()`: the length of one element of a buffer array, host-side metadata as
        // `x.len()` is.
        if let (Expr::Index(element), true) = (crate::ast::ungroup_expr(&call.receiver), length)
            && let Expr::Path(path) = crate::ast::ungroup_expr(&element.expr)
            && path.qself.is_none()
            && let Some(array) = path.path.get_ident()
        {
            self.push(array, Use::Length);
            return self.visit_expr(&element.index);
        }
        let receiver = match &*call.receiver {
            Expr::Path(path) if path.qself.is_none() => path.path.get_ident(),
            _ => None,
        };
        let Some(receiver) = receiver else {
            return visit::visit_expr_method_call(self, call);
        };
        let method = call.method.to_string();
        let use_ = if call.args.is_empty() && (method == "len" || method == "is_empty") {
            Use::Length
        } else if method.ends_with("_mut") {
            Use::MutMethod(method)
        } else {
            Use::Other
        };
        self.push(receiver, use_);
        for arg in &call.args {
            self.visit_expr(arg);
        }
    }

    fn visit_expr_closure(&mut self, closure: &'ast syn::ExprClosure) {
        let inputs: Vec<&Pat> = closure.inputs.iter().collect();
        self.with_bound(&inputs, |finder| finder.visit_expr(&closure.body));
    }

    fn visit_expr_for_loop(&mut self, for_loop: &'ast syn::ExprForLoop) {
        self.visit_expr(&for_loop.expr);
        self.with_bound(&[&for_loop.pat], |finder| {
            finder.visit_block(&for_loop.body)
        });
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        // syn 3 keeps an arm's `if` guard in its pattern; the guard sees the pattern's names.
        let (pat, guard) = match &arm.pat {
            Pat::Guard(guarded) => (&*guarded.pat, Some(&*guarded.guard)),
            pat => (pat, None),
        };
        self.with_bound(&[pat], |finder| {
            if let Some(guard) = guard {
                finder.visit_expr(guard);
            }
            finder.visit_expr(&arm.body);
        });
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        // A `let` binds its names for the statements after it.
        let depth = self.bound.len();
        for stmt in &block.stmts {
            match stmt {
                syn::Stmt::Local(local) => {
                    if let Some(init) = &local.init {
                        self.visit_expr(&init.expr);
                        if let Some((_, diverge)) = &init.diverge {
                            self.visit_expr(diverge);
                        }
                    }
                    bind(&local.pat, &mut self.bound);
                }
                stmt => self.visit_stmt(stmt),
            }
        }
        self.bound.truncate(depth);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        for mention in token_mentions(mac.tokens.clone()) {
            self.push(&mention.ident, mention.use_);
        }
    }
}

/// The names a pattern binds.
fn bind(pat: &Pat, bound: &mut Vec<String>) {
    struct Binder<'b>(&'b mut Vec<String>);
    impl<'ast> Visit<'ast> for Binder<'_> {
        fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
            self.0.push(pat.ident.to_string());
            visit::visit_pat_ident(self, pat);
        }
    }
    Binder(bound).visit_pat(pat);
}

fn collect_tokens(tokens: TokenStream, found: &mut Vec<Mention>) {
    for token in tokens {
        match token {
            TokenTree::Ident(ident) => found.push(Mention {
                ident,
                use_: Use::Other,
            }),
            TokenTree::Group(group) => collect_tokens(group.stream(), found),
            TokenTree::Literal(literal) => {
                for name in format_arguments(&literal.to_string()) {
                    found.push(Mention {
                        ident: Ident::new(&name, literal.span()),
                        use_: Use::Other,
                    });
                }
            }
            TokenTree::Punct(_) => {}
        }
    }
}

/// The inline arguments of a string literal read as a format string: `"{step} of {n:>4}"`
/// gives `step` and `n`. Other literals give nothing.
fn format_arguments(literal: &str) -> Vec<String> {
    if !literal.starts_with('"') && !literal.starts_with('r') {
        return Vec::new();
    }
    let mut names = Vec::new();
    let mut rest = literal;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        if let Some(stripped) = rest.strip_prefix('{') {
            rest = stripped;
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let starts_like_ident = name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_');
        let follows = rest[name.len()..].chars().next();
        if starts_like_ident
            && matches!(follows, Some('}' | ':'))
            && syn::parse_str::<Ident>(&name).is_ok()
        {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(source: &str) -> Vec<(String, Use)> {
        let expr: Expr = syn::parse_str(source).expect("expression");
        mentions(&expr)
            .into_iter()
            .map(|m| (m.ident.to_string(), m.use_))
            .collect()
    }

    #[test]
    fn paths_methods_and_macros_are_mentions() {
        assert_eq!(
            names("(f.len() as u32).div_ceil(b) + g.device_ptr() as u32"),
            [
                ("f".to_owned(), Use::Length),
                ("b".to_owned(), Use::Other),
                ("g".to_owned(), Use::Other)
            ]
        );
        // The length of one element of an array, and the index's own mentions.
        assert_eq!(
            names("xs[i + k].len() as u32 + xs[0].first_mut()"),
            [
                ("xs".to_owned(), Use::Length),
                ("i".to_owned(), Use::Other),
                ("k".to_owned(), Use::Other),
                ("xs".to_owned(), Use::Other),
            ]
        );
        assert_eq!(
            names("smooth(x.as_view_mut(), &*y, (z, w.field))"),
            [
                ("smooth".to_owned(), Use::Other),
                ("x".to_owned(), Use::MutMethod("as_view_mut".to_owned())),
                ("y".to_owned(), Use::Other),
                ("z".to_owned(), Use::Other),
                ("w".to_owned(), Use::Other)
            ]
        );
        assert_eq!(
            names(r#"println!("{step} of {n:>4}, {{literal}}", m)"#),
            [
                ("step".to_owned(), Use::Other),
                ("n".to_owned(), Use::Other),
                ("m".to_owned(), Use::Other)
            ]
        );
    }

    #[test]
    fn names_bound_inside_are_not_mentions() {
        assert_eq!(
            names("{ let f = 1; move |g: u32| f + g + h }"),
            [("h".to_owned(), Use::Other)]
        );
        assert_eq!(
            names("match q { Some(v) => v, None => w }"),
            [("q".to_owned(), Use::Other), ("w".to_owned(), Use::Other)]
        );
    }

    #[test]
    fn match_guards_see_the_arm_names_and_mention_the_rest() {
        assert_eq!(
            names("match q { Some(v) if v > lim => v, _ => w }"),
            [
                ("q".to_owned(), Use::Other),
                ("lim".to_owned(), Use::Other),
                ("w".to_owned(), Use::Other)
            ]
        );
    }
}
