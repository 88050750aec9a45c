//! Buffer params named after themselves in the checked CPU backend's race reports: a race
//! between `Overlap.compute` and `Overlap.d2h` on `dev`, not on "device buffer #1". A buffer
//! its owner named (`named`) keeps that name.

use bytemuck::Pod;

use crate::memory::{DeviceBuffer, ManagedBuffer, PinnedBuffer};

/// A pipeline param whose memory can be named after the param. Generated pipelines name
/// each buffer param through [`NameParam`] before a step when the context is checked.
pub trait ParamName {
    /// Names the memory `name` (an array's elements `name[i]`).
    fn name_as_param(&self, name: &str);
}

impl<T: Pod> ParamName for DeviceBuffer<T> {
    fn name_as_param(&self, name: &str) {
        DeviceBuffer::name_as_param(self, name);
    }
}

impl<T: Pod> ParamName for PinnedBuffer<T> {
    fn name_as_param(&self, name: &str) {
        PinnedBuffer::name_as_param(self, name);
    }
}

impl<T: Pod> ParamName for ManagedBuffer<T> {
    fn name_as_param(&self, name: &str) {
        ManagedBuffer::name_as_param(self, name);
    }
}

impl<B: ParamName> ParamName for [B] {
    fn name_as_param(&self, name: &str) {
        for (i, buffer) in self.iter().enumerate() {
            buffer.name_as_param(&format!("{name}[{i}]"));
        }
    }
}

/// A param's memory to name: generated code calls `(&NameParam(x)).name_as("x")` with both
/// [`NameAsParam`] and [`NameAsParamFallback`] in scope, so a param whose type has no
/// [`ParamName`] (an ill-formed one, already an error of its own) is skipped, not a second
/// error.
pub struct NameParam<'a, B: ?Sized>(pub &'a B);

impl<B: ?Sized> std::fmt::Debug for NameParam<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NameParam")
    }
}

/// Names a [`NameParam`] whose memory can be named.
pub trait NameAsParam {
    /// Names the memory `name`.
    fn name_as(&self, name: &str);
}

impl<B: ParamName + ?Sized> NameAsParam for NameParam<'_, B> {
    fn name_as(&self, name: &str) {
        self.0.name_as_param(name);
    }
}

/// What a [`NameParam`] of any other type does: nothing.
pub trait NameAsParamFallback {
    /// Does nothing.
    fn name_as(&self, name: &str);
}

impl<B: ?Sized> NameAsParamFallback for &NameParam<'_, B> {
    fn name_as(&self, _name: &str) {}
}
