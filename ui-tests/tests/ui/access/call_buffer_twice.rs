//! A function cannot hold a `&mut` borrow of a buffer next to another borrow of it: `keys` is
//! written and passed twice. Pass it once.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Sort {
        streams { main }
        params { keys: &mut DeviceBuffer<u32> }
        stage sort on main {
            call sort(keys, keys) writes(keys);
        }
    }
}

fn sort(_stream: &TypedStream<SortMain>, _keys: &mut DeviceBuffer<u32>, _values: &mut DeviceBuffer<u32>) -> Result<()> {
    Ok(())
}

fn main() {}
