//! Writing a snapshot when the memory runs out is an `OutOfMemory` error,
//! never an abort, however little is left: an allocator with a budget
//! refuses what goes beyond it. (Its own binary, without the test harness:
//! the budget applies to every allocation of the process.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use halfopen::{Breaker, Config, Instant, Metrics, OutOfMemory, Registry};

/// Refuses allocations beyond `LEFT` bytes while `LIMITED`.
struct Budget;

static LIMITED: AtomicBool = AtomicBool::new(false);
static LEFT: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Budget {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if LIMITED.load(Ordering::SeqCst) {
            let left = LEFT.load(Ordering::SeqCst);
            if layout.size() > left {
                return std::ptr::null_mut();
            }
            LEFT.store(left - layout.size(), Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Budget = Budget;

/// `write` run with `budget` bytes to allocate.
fn with_budget<T>(budget: usize, write: impl FnOnce() -> T) -> T {
    LEFT.store(budget, Ordering::SeqCst);
    LIMITED.store(true, Ordering::SeqCst);
    let out = write();
    LIMITED.store(false, Ordering::SeqCst);
    out
}

fn main() {
    let now = Instant::from_millis(1_000);
    let mut breaker = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
    for _ in 0..5 {
        let permit = breaker.try_acquire(now).decision.unwrap();
        breaker.record(permit, halfopen::Outcome::Failure, now);
    }
    let snapshot = breaker.snapshot(now);
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 100).unwrap();
    for i in 0..50 {
        let _ = registry.try_acquire(&format!("instance-{i}"), now).unwrap();
    }
    let saved = registry.snapshot(now);
    let json = snapshot.to_json().len();
    let registry_json = saved.to_json().len();
    // Every budget up to a little more than the text needs: each is either
    // enough (the text, whole) or an error; the process never aborts.
    let (mut refused, mut written) = (0, 0);
    for budget in (0..=4 * json).chain((0..=4 * registry_json).step_by(97)) {
        // (Copies made before the budget applies.)
        let (copy, copies) = ((snapshot.clone(), snapshot.clone()), saved.clone());
        let one = with_budget(budget, || copy.0.try_into_json());
        let bytes = with_budget(budget, || copy.1.try_into_bytes());
        let all = with_budget(budget, || copies.try_into_json());
        for result in [one.map(|t| t.len()), bytes.map(|b| b.len()), all.map(|t| t.len())] {
            match result {
                Ok(_) => written += 1,
                Err(OutOfMemory) => refused += 1,
            }
        }
        assert_eq!(with_budget(usize::MAX, || snapshot.to_json()).len(), json);
    }
    assert!(refused > 0 && written > 0, "{refused} refused, {written} written");
    println!("out_of_memory: {refused} writes refused, {written} whole, none aborted");
}
