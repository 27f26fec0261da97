// The kit's similarity report over one lab's submitted C files: JPlag's comparison of every pair
// of students, with the lab's skeletons as base code (what every student was given does not
// count), written as a CSV table and as JPlag's own report (a zip that JPlag's report viewer
// opens). Run by scripts/similarity.sh, which lays out the directories:
//   java -cp 'lib/*:.' Similarity SUBMISSIONS BASECODE OUT_DIR
// SUBMISSIONS holds one directory per student with that student's .c files; BASECODE the
// skeletons. OUT_DIR receives similarity.csv (sorted, most similar first) and jplag-report.zip.

import de.jplag.JPlag;
import de.jplag.JPlagComparison;
import de.jplag.JPlagResult;
import de.jplag.c.CLanguage;
import de.jplag.options.JPlagOptions;
import de.jplag.reporting.reportobject.ReportObjectFactory;

import java.io.File;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Set;

public final class Similarity {
    private Similarity() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Similarity SUBMISSIONS BASECODE OUT_DIR");
            System.exit(2);
        }
        File submissions = new File(args[0]);
        File base = new File(args[1]);
        File out = new File(args[2]);
        JPlagOptions options = new JPlagOptions(new CLanguage(), Set.of(submissions), Set.of())
                .withBaseCodeSubmissionDirectory(base)
                .withFileSuffixes(List.of(".c", ".h"))
                .withMaximumNumberOfComparisons(JPlagOptions.SHOW_ALL_COMPARISONS);
        JPlagResult result = JPlag.run(options);
        List<JPlagComparison> pairs = new ArrayList<>(result.getAllComparisons());
        pairs.sort(Comparator.comparingDouble(JPlagComparison::similarity).reversed());
        if (!out.isDirectory() && !out.mkdirs()) {
            throw new IllegalStateException("cannot create " + out);
        }
        try (PrintWriter w = new PrintWriter(new File(out, "similarity.csv"), StandardCharsets.UTF_8)) {
            w.println("first,second,similarity,max_similarity,matched_tokens");
            for (JPlagComparison c : pairs) {
                w.printf(Locale.ROOT, "%s,%s,%.4f,%.4f,%d%n", c.firstSubmission().getName(),
                        c.secondSubmission().getName(), c.similarity(), c.maximalSimilarity(),
                        c.getNumberOfMatchedTokens());
            }
        }
        new ReportObjectFactory(new File(out, "jplag-report.zip")).createAndSaveReport(result);
        System.out.printf(Locale.ROOT, "similarity: %d submissions, %d pairs compared in %d ms%n",
                result.getNumberOfSubmissions(), pairs.size(), result.getDuration());
    }
}
