package camera

// mt19937 is the 32-bit Mersenne Twister exactly as PyTorch's CPU generator
// runs it (at::mt19937): torch.manual_seed(s) seeds it with the low 32 bits
// of s (init_genrand), and generator->random() returns the next tempered
// 32-bit output. Together with randperm below it reproduces the samples
// torch.randperm draws on the CPU after torch.manual_seed(s).
type mt19937 struct {
	state [624]uint32
	i     int
}

func newMT19937(seed uint64) *mt19937 {
	m := &mt19937{i: 624}
	m.state[0] = uint32(seed)
	for j := 1; j < 624; j++ {
		p := m.state[j-1]
		m.state[j] = 1812433253*(p^(p>>30)) + uint32(j)
	}
	return m
}

func (m *mt19937) next() uint32 {
	if m.i >= 624 {
		for j := 0; j < 624; j++ {
			y := m.state[j]&0x80000000 | m.state[(j+1)%624]&0x7fffffff
			v := m.state[(j+397)%624] ^ y>>1
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.state[j] = v
		}
		m.i = 0
	}
	y := m.state[m.i]
	m.i++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// randperm is torch.randperm(n) on the CPU (randperm_cpu for n below
// 2³²/20): the identity, then for i = 0..n−2 swap i with i + random() mod (n−i).
func (m *mt19937) randperm(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	for i := 0; i < n-1; i++ {
		z := int(uint64(m.next()) % uint64(n-i))
		r[i], r[i+z] = r[i+z], r[i]
	}
	return r
}
