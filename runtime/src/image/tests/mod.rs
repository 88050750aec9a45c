//! Tests shared by the image checks: builders of valid images to break one field at a time
//! (`build`), an independent bounds-checked reader that walks an image the way the driver
//! does, trusting its headers (`oracle`), and property tests that fuzz the checks against it
//! (`fuzz`).

pub(crate) mod build;
mod fixtures;
mod fuzz;
pub(crate) mod oracle;
