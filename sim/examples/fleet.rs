fn main() {
    let seed = std::env::args().nth(1).map_or(1, |s| s.parse().unwrap());
    let t = std::time::Instant::now();
    print!("{}", halfopen_sim::table::fleet(&halfopen_sim::scenarios::all(), seed));
    eprintln!("{:?}", t.elapsed());
}
