"""Link lab walk-through: where credits start to limit an NVLink 5 direction.

Run: python examples/link_lab.py

Sweeps credits per VC on one VC and prints achieved throughput next to the
closed-form bound min(payload rate x efficiency, C x 16 B / RTT x efficiency).
"""

import flitsim

link = flitsim.link_preset("nvlink5")
rate = link.payload_GBps() * link.packet.efficiency(256)
print(f"{'credits':>8s} {'RTT ns':>8s} {'bound GB/s':>11s} {'sim GB/s':>9s} {'exhaustion':>11s}")
for credits in (17, 34, 68, 136, 272, 544):
    r = flitsim.link_transfer(link, 8 << 20, 256, credits_per_vc_flits=credits, vcs=1,
                              max_recorded_packets=0)
    bound = min(rate, credits * 16 / r.credit_rtt_ps * 1e3 * 256 / 272)
    ex = r.vcs[0]["exhaustion_ps"] / r.run_end_ps
    print(f"{credits:8d} {r.credit_rtt_ps / 1e3:8.2f} {bound:11.2f} {r.throughput_GBps:9.2f} {ex:10.1%}")
