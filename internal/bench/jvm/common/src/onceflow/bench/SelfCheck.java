package onceflow.bench;

import java.util.HexFormat;

/**
 * Prints what eosbench's Go tests compare with internal/bench's own
 * handler (TestJVMHandlerMatchesGo): the digest of 3 rounds over a 100-byte
 * value 0, 1, 2, ..., mix of a few ids, and which of ids 0..999 are faulty
 * at a 10% cut. One line each.
 */
public final class SelfCheck {
    public static void main(String[] argv) {
        Args a = new Args(argv);
        byte[] v = new byte[100];
        for (int i = 0; i < v.length; i++) {
            v[i] = (byte) i;
        }
        System.out.println("hash " + HexFormat.of().formatHex(Work.hashRounds(v, 3)));
        System.out.println("mix " + Long.toUnsignedString(Work.mix(0)) + " " + Long.toUnsignedString(Work.mix(12345)));
        Work w = new Work(0, 0, 0, Long.parseUnsignedLong(a.string("fault-cut")), 1000);
        StringBuilder b = new StringBuilder("faulty");
        for (long id = 0; id < 1000; id++) {
            if (w.faulty(id)) {
                b.append(' ').append(id);
            }
        }
        System.out.println(b);
    }
}
