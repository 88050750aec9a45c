//! A reference to a `Vec` of buffers (or an array, a tuple, an `Option<&mut ...>`): the
//! buffers inside are not params the pipeline orders one by one. Declare an array of
//! buffers, `&mut [DeviceBuffer<f32>]`, whose elements statements name as `fields[i]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Fields {
        streams { main }
        params { fields: &Vec<DeviceBuffer<f32>>, maybe: Option<&'static mut DeviceBuffer<f32>> }
        stage s on main { call touch(fields) reads(fields); }
    }
}

fn main() {}
