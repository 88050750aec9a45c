//! The syntax of devices: `devices { gpu0, gpu1 }`, and `on DEVICE` after a stream, a
//! buffer param or a scratch buffer.
//!
//! A pipeline without a `devices` block runs on the one device its `new` is given, as it
//! always did. With one, `new` takes one context per declared device (in order), every
//! stream and buffer belongs to one device (the first declared, unless `on` says another),
//! and the checks keep each device's work to its own memory: between devices data moves by
//! `copy` (a peer copy).

use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Ident};

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
}

impl Parse for Device {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        Ok(Device {
            attrs: input.call(Attribute::parse_outer)?,
            name: input.parse()?,
        })
    }
}

/// `on gpu1` after a stream, a buffer param or a scratch buffer.
#[derive(Debug)]
pub struct OnDevice {
    /// The `on` keyword.
    pub keyword: kw::on,
    /// The device named.
    pub device: Ident,
}

impl OnDevice {
    /// `on DEVICE`, if the input continues with `on`.
    pub fn parse_optional(input: ParseStream<'_>) -> syn::Result<Option<OnDevice>> {
        if !input.peek(kw::on) {
            return Ok(None);
        }
        Ok(Some(OnDevice {
            keyword: input.parse()?,
            device: input.parse()?,
        }))
    }
}
