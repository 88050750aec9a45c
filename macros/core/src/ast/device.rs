//! The syntax of devices: `devices { gpu0, gpu1 }` or a device array `devices { gpu[4] }`,
//! and `on DEVICE` after a stream, a buffer param or a scratch buffer: `on gpu0`, one
//! element `on gpu[2]`, or `on gpu[..]` for a stream array or buffer array whose element `k`
//! is on `gpu[k]`.
//!
//! A pipeline without a `devices` block runs on the one device its `new` is given, as it
//! always did. With one, `new` takes one context per declared device (in order), every
//! stream and buffer belongs to one device (the first declared, unless `on` says another),
//! and the checks keep each device's work to its own memory: between devices data moves by
//! `copy` (a peer copy).

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Expr, Ident, Token, bracketed};

use crate::symbol::kw;

/// `devices { gpu0, gpu1 }`.
#[derive(Debug)]
pub struct Devices {
    /// Attributes before the block (only doc comments are accepted).
    pub attrs: Vec<Attribute>,
    /// The `devices` keyword.
    pub keyword: kw::devices,
    /// The declared devices, in the order `new` takes their contexts.
    pub devices: Vec<Device>,
}

/// One declared device.
#[derive(Debug)]
pub struct Device {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// Its name: the name of its context parameter in `new`.
    pub name: Ident,
    /// `[N]` for a device array: `new` takes `&[Context; N]` under its name.
    pub count: Option<Expr>,
}

impl Parse for Device {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        let count = if input.peek(syn::token::Bracket) {
            let content;
            bracketed!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        Ok(Device { attrs, name, count })
    }
}

/// Which element of a device array `on` names.
#[derive(Debug)]
pub enum DeviceIndex {
    /// `on gpu[..]`: element `k` of a stream array or buffer array on `gpu[k]`.
    Each(Span),
    /// `on gpu[EXPR]`: one element (a constant).
    At(Expr),
}

/// `on gpu1` after a stream, a buffer param or a scratch buffer.
#[derive(Debug)]
pub struct OnDevice {
    /// The `on` keyword.
    pub keyword: kw::on,
    /// The device named.
    pub device: Ident,
    /// `[..]` or `[EXPR]` after a device array's name.
    pub index: Option<DeviceIndex>,
}

impl OnDevice {
    /// `on DEVICE`, if the input continues with `on`.
    pub fn parse_optional(input: ParseStream<'_>) -> syn::Result<Option<OnDevice>> {
        if !input.peek(kw::on) {
            return Ok(None);
        }
        let keyword = input.parse()?;
        let device = input.parse()?;
        let index = if input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            if content.peek(Token![..]) {
                let dots = content.parse::<Token![..]>()?;
                if !content.is_empty() {
                    return Err(syn::Error::new(
                        dots.spans[0],
                        "a device is named by one constant index, `on gpu[2]`, or `on gpu[..]` for element `k` of an array on `gpu[k]`; a range of devices is not accepted",
                    ));
                }
                Some(DeviceIndex::Each(bracket.span.join()))
            } else {
                Some(DeviceIndex::At(content.parse()?))
            }
        } else {
            None
        };
        Ok(Some(OnDevice {
            keyword,
            device,
            index,
        }))
    }
}
