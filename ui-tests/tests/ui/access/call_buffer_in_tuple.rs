//! A buffer inside a tuple, a reborrow or a block is still passed: `keys` is named but not
//! declared. Add it to `reads(...)` (or `writes(...)`).

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Sort {
        streams { main }
        params { keys: &DeviceBuffer<u32>, values: &mut DeviceBuffer<u32> }
        stage sort on main {
            call sort((&*keys, &mut *values)) writes(values);
        }
    }
}

fn sort(_stream: &TypedStream<SortMain>, _kv: (&DeviceBuffer<u32>, &mut DeviceBuffer<u32>)) -> Result<()> {
    Ok(())
}

fn main() {}
