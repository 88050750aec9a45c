//! A `call` passes a buffer as its clause declares it: `halo` is listed in `reads(...)`, so
//! `exchange` gets `&DeviceBuffer`, but it takes `&mut`. Declare it in `writes(...)`.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Exchange {
        streams { main }
        params { halo: &mut DeviceBuffer<f32> }
        stage exchange on main {
            call exchange(halo) reads(halo);
        }
    }
}

fn exchange(_stream: &TypedStream<ExchangeMain>, _halo: &mut DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

fn main() {}
