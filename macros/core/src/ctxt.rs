//! Collects the errors of a checking pass so they are reported together, as serde_derive's
//! `Ctxt` does: each rule reports what it finds and carries on.

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// Error collector shared by the rules of one pass.
#[derive(Debug, Default)]
pub struct Ctxt {
    // A `RefCell` so rules can take `&Ctxt` while they hold borrows of the syntax tree.
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    /// An empty collector.
    pub fn new() -> Self {
        Ctxt::default()
    }

    /// Reports `message` on the tokens of `tokens` (their first to last span).
    pub fn error_spanned_by<T: ToTokens>(&self, tokens: T, message: impl Display) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// Reports `message` at `span`.
    pub fn error_at(&self, span: Span, message: impl Display) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new(span, message));
    }

    /// Reports `message` on everything from `first` to `last`, such as a whole call from its
    /// path to its closing parenthesis.
    pub fn error_between(&self, first: Span, last: Span, message: impl Display) {
        // `syn::Error::new_spanned` takes the span of the first and the last token, so two
        // placeholder tokens carry the range.
        let tokens: TokenStream = [first, last]
            .into_iter()
            .map(|span| TokenTree::Ident(Ident::new("range", span)))
            .collect();
        self.error_spanned_by(tokens, message);
    }

    /// Moves the errors `other` collected into this collector; whether there were any.
    pub fn absorb(&self, other: Ctxt) -> bool {
        let errors = other.errors.into_inner();
        let any = !errors.is_empty();
        self.errors.borrow_mut().extend(errors);
        any
    }

    /// Whether any error has been reported.
    pub fn failed(&self) -> bool {
        !self.errors.borrow().is_empty()
    }

    /// Every error reported, combined into one, or `Ok` if there were none.
    pub fn check(self) -> syn::Result<()> {
        let mut errors = self.errors.into_inner().into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for error in errors {
            combined.combine(error);
        }
        Err(combined)
    }
}
