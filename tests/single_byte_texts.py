"""Short realistic sentences and titles in single-byte code pages of non-Latin and Central
European scripts, for the legacy-charset guess (charsets.py).

Russian, Ukrainian and Bulgarian in windows-1251 and KOI8-R/KOI8-U, Greek in windows-1253
and ISO-8859-7, Thai in windows-874, Hebrew in windows-1255, Arabic in windows-1256,
Turkish in windows-1254, Czech and Polish in ISO-8859-2: titles, a sentence or two, and a
longer line each. Written for these tests; no text copied from elsewhere.
"""

RUSSIAN = (
    "Привет",
    "Здравствуйте",
    "Протокол собрания",
    "Отчёт за третий квартал",
    "Список покупок: молоко, хлеб, яйца",
    "Встреча переносится на среду, в десять часов утра.",
    "Фамилия;Имя;Телефон\nИванов;Сергей;+7 495 123-45-67\nПетрова;Анна;+7 812 765-43-21",
    "Уважаемые коллеги, напоминаем, что до конца месяца необходимо сдать годовые отчёты "
    "в бухгалтерию. Справки можно получить у секретаря на втором этаже.",
)
UKRAINIAN = (
    "Протокол засідання",
    "Доброго дня! Надсилаю звіт за минулий тиждень.",
    "Київ, вулиця Хрещатик, будинок 22",
    "Шановні батьки, батьківські збори відбудуться у четвер о шостій вечора в актовій "
    "залі школи. Просимо не запізнюватися.",
)
BULGARIAN = (
    "Счетоводен отчет",
    "Добър ден, изпращам ви документите за подпис.",
    "Срещата ще бъде в понеделник от девет часа в голямата заседателна зала на общината.",
)
GREEK = (
    "Καλημέρα",
    "Ελληνικά",
    "Πρακτικά συνεδρίασης",
    "Λίστα αγορών: γάλα, ψωμί, αυγά",
    "Η συνάντηση μεταφέρεται για την Τετάρτη στις δέκα το πρωί.",
    "Αγαπητοί συνάδελφοι, σας υπενθυμίζουμε ότι οι ετήσιες αναφορές πρέπει να υποβληθούν "
    "στο λογιστήριο μέχρι το τέλος του μήνα.",
)
THAI = (
    "สวัสดีครับ",
    "รายงานการประชุม",
    "รายการซื้อของ: นม ขนมปัง ไข่",
    "การประชุมเลื่อนไปเป็นวันพุธ เวลาสิบโมงเช้า",
    "เรียนเพื่อนร่วมงานทุกท่าน กรุณาส่งรายงานประจำปีให้ฝ่ายบัญชีภายในสิ้นเดือนนี้ "
    "หากมีข้อสงสัยสามารถสอบถามได้ที่เลขานุการชั้นสอง",
)
HEBREW = (
    "שלום",
    "פרוטוקול ישיבה",
    "רשימת קניות: חלב, לחם, ביצים",
    "הפגישה נדחתה ליום רביעי בשעה עשר בבוקר.",
    "עמיתים יקרים, נא להגיש את הדוחות השנתיים למחלקת הנהלת החשבונות עד סוף החודש. "
    "לשאלות אפשר לפנות למזכירה בקומה השנייה.",
)
ARABIC = (
    "مرحبا",
    "محضر الاجتماع",
    "قائمة المشتريات: حليب، خبز، بيض",
    "تم تأجيل الاجتماع إلى يوم الأربعاء الساعة العاشرة صباحا.",
    "الزملاء الأعزاء، نرجو تسليم التقارير السنوية إلى قسم المحاسبة قبل نهاية الشهر. "
    "للاستفسار يرجى مراجعة السكرتيرة في الطابق الثاني.",
)
TURKISH = (
    "Toplantı tutanağı",
    "Günaydın, raporu ekte gönderiyorum.",
    "Alışveriş listesi: süt, ekmek, yumurta",
    "Toplantı çarşamba sabah saat ona ertelendi.",
    "Değerli çalışma arkadaşlarım, yıllık raporların ay sonuna kadar muhasebe bölümüne "
    "teslim edilmesi gerekmektedir. Sorularınız için ikinci kattaki sekreterliğe başvurunuz.",
)
CENTRAL = (
    "Čeština",
    "Zápis z porady",
    "Dzień dobry, przesyłam sprawozdanie za zeszły tydzień.",
    "Schůzka se přesouvá na středu v deset hodin dopoledne.",
)
#: (text, encoding) for every sample.
CORPUS = (
    [(t, "cp1251") for t in RUSSIAN + UKRAINIAN + BULGARIAN]
    + [(t, "koi8_r") for t in RUSSIAN]
    + [(t, "koi8_u") for t in UKRAINIAN]
    + [(t, "cp1253") for t in GREEK]
    + [(t, "iso8859_7") for t in GREEK]
    + [(t, "cp874") for t in THAI]
    + [(t, "cp1255") for t in HEBREW]
    + [(t, "cp1256") for t in ARABIC]
    + [(t, "cp1254") for t in TURKISH]
    + [(t, "iso8859_2") for t in CENTRAL]
)
